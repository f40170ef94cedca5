# syntax=docker/dockerfile:1
#
# The Lightsout controller image. It doubles as the worker image: a trial pod's `worker` init
# container runs `/lightsout-worker copy-self /opt/lightsout/bin` from it (the controller's
# --worker-image is this image).
#
#   /lightsout-controller   the controller (the entrypoint)
#   /lightsout              the CLI (`lightsout scripted-server`, `lightsout validate`, ...)
#   /lightsout-worker       the static worker (no ELF interpreter, no shared libraries)
#
# Build from the repository root (BuildKit; only the paths copied below are sent):
#
#   docker build -f images/controller.Dockerfile -t ghcr.io/lightsout-dev/lightsout:0.1.0 .
#
# The static worker is built for x86_64-unknown-linux-gnu (scripts/build-static-worker.sh), so
# this image is linux/amd64 only.

FROM rust:1-bookworm AS builder
# libc6-dev: the static glibc the worker links in; binutils: readelf, to check it is static.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libc6-dev binutils \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock pricing.yaml ./
COPY api api
COPY model model
COPY stats stats
COPY trajectory trajectory
COPY swe-prbench swe-prbench
COPY core core
COPY report report
COPY worker worker
COPY cli cli
COPY controller controller
COPY s3 s3
COPY scripted scripted
COPY testkit testkit
# cli/Cargo.toml names integration tests under tests/; cargo wants them present.
COPY tests tests
# The scripted model server (lightsout-scripted, in the CLI) embeds the sample datasets (include_str!).
COPY datasets datasets
COPY scripts scripts
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    set -eux; \
    cargo build --release --locked -p lightsout-controller -p lightsout; \
    worker="$(scripts/build-static-worker.sh --profile release)"; \
    if readelf -l "$worker" | grep -q 'program interpreter'; then echo "$worker is not static" >&2; exit 1; fi; \
    if readelf -d "$worker" | grep -q '(NEEDED)'; then echo "$worker needs shared libraries" >&2; exit 1; fi; \
    mkdir -p /out; \
    cp target/release/lightsout-controller target/release/lightsout /out/; \
    cp "$worker" /out/lightsout-worker; \
    /out/lightsout-worker --version

FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.description="Lightsout controller, CLI and static trial worker" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/lightsout-controller /lightsout-controller
COPY --from=builder /out/lightsout /lightsout
COPY --from=builder /out/lightsout-worker /lightsout-worker
USER 65532:65532
ENTRYPOINT ["/lightsout-controller"]
