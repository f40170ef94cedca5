# syntax=docker/dockerfile:1
#
# A harness image: one agentic harness pinned at one version, installed under /harness by
# `lightsout-worker install-harness NAME VERSION --root /harness`. A trial pod's `harness` init
# container runs `cp -a /harness/. /opt/lightsout/harnesses/` from it; nothing else of the image
# is used, so it carries no Node.js or Python at run time: the npm harnesses run their native
# executables, and mini-swe-agent's virtualenv runs on the task image's /usr/bin/python3 (which
# must be the Python minor version the venv was built with: Debian bookworm's 3.11).
#
# The controller expects it at `<harness image repository>/<HARNESS>:<VERSION>` (a `+` in the
# version written `_`), e.g.
#
#   docker build -f images/harness.Dockerfile \
#     --build-arg HARNESS=codex --build-arg VERSION=0.171.0 \
#     --build-arg CONTROLLER_IMAGE=ghcr.io/lightsout-dev/lightsout:0.1.0 \
#     -t ghcr.io/lightsout-dev/harness/codex:0.171.0 images
#
# HARNESS: codex | claude-code | copilot-cli | mini-swe-agent. The build context is not used.

# The image holding the static /lightsout-worker (the controller image).
ARG CONTROLLER_IMAGE=ghcr.io/lightsout-dev/lightsout:0.1.0
ARG HARNESS
ARG NODE_IMAGE=node:22-bookworm-slim

FROM ${CONTROLLER_IMAGE} AS controller
FROM ${NODE_IMAGE} AS node

# npm harnesses: npm is needed only to install them (--ignore-scripts; the native executable
# comes in a per-platform optional dependency). Node.js 22 from the official image.
FROM debian:bookworm-slim AS npm
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && node --version && npm --version

# mini-swe-agent: a virtualenv of the system interpreter (/usr/bin/python3).
FROM debian:bookworm-slim AS python
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*

FROM npm AS tools-codex
FROM npm AS tools-claude-code
FROM npm AS tools-copilot-cli
FROM python AS tools-mini-swe-agent

FROM tools-${HARNESS} AS install
ARG HARNESS
ARG VERSION
COPY --from=controller /lightsout-worker /usr/local/bin/lightsout-worker
RUN set -eux; \
    test -n "${HARNESS}" && test -n "${VERSION}"; \
    lightsout-worker install-harness "${HARNESS}" "${VERSION}" --root /harness; \
    rm -rf /root/.npm /root/.cache; \
    chmod -R a+rX /harness

FROM debian:bookworm-slim
ARG HARNESS
ARG VERSION
LABEL dev.lightsout.harness="${HARNESS}" \
      dev.lightsout.harness-version="${VERSION}"
COPY --from=install /harness /harness
USER 65532:65532
