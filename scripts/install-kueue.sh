#!/usr/bin/env bash
# Builds Kueue's manager from its Go module at a pinned version, for the tests that run Kueue
# on the test control plane (testkit/src/kueue.rs), into a cache directory keyed by version,
# with Kueue's CRDs and webhook manifests beside it. What is already built is skipped.
#
#   scripts/install-kueue.sh [VERSION]      # default: 0.11.9
#
# Why 0.11.9: the newest Kueue the Go module proxy serves whose README still supports
# Kubernetes 1.28, our floor ("Requires Kubernetes 1.25 or newer"); 0.14 and later require 1.29.
#
# Prints the directory holding the binary on its last line. The tests look in
# $LIGHTSOUT_KUEUE_DIR/v<VERSION> (version from $LIGHTSOUT_KUEUE_VERSION, default 0.11.9); the
# cache defaults to /var/cache/lightsout/kueue as root, else ~/.cache/lightsout/kueue. Needs Go
# and the Go module proxy.
set -euo pipefail

version="${1:-${LIGHTSOUT_KUEUE_VERSION:-0.11.9}}"
version="${version#v}"

if [ -n "${LIGHTSOUT_KUEUE_DIR:-}" ]; then
  cache="$LIGHTSOUT_KUEUE_DIR"
elif [ "$(id -u)" = 0 ]; then
  cache=/var/cache/lightsout/kueue
else
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/lightsout/kueue"
fi
out="$cache/v$version"
bin="$out/bin"
mkdir -p "$bin"

export CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
command -v go >/dev/null || { echo "install-kueue: Go is not installed (go version)" >&2; exit 2; }

if [ -x "$bin/kueue" ] && [ -f "$bin/kueue.built" ] && [ "$(cat "$bin/kueue.built")" = "v$version" ]; then
  echo "kueue v$version: cached"
else
  start=$(date +%s)
  module="$(go mod download -json "sigs.k8s.io/kueue@v$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [ -d "$module" ] || { echo "install-kueue: sigs.k8s.io/kueue@v$version was not downloaded" >&2; exit 1; }
  # Built as the main module, from a writable copy: Kueue's go.mod has a replace directive
  # (controller-runtime), which `go install module@version` refuses, and its go.sum pins the rest.
  work="$out/build"
  rm -rf "$work" && mkdir -p "$work"
  cp -r "$module/." "$work/" && chmod -R u+w "$work"
  cd "$work"
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=v$version" \
    -o "$bin/kueue.tmp" ./cmd/kueue
  mv "$bin/kueue.tmp" "$bin/kueue"
  rm -rf "$out/crd" "$out/webhook"
  mkdir -p "$out/crd" "$out/webhook"
  cp config/components/crd/bases/*.yaml "$out/crd/"
  cp config/components/webhook/manifests.yaml "$out/webhook/"
  echo "v$version" >"$bin/kueue.built"
  cd / && rm -rf "$work"
  echo "kueue v$version: built in $(( $(date +%s) - start )) s"
fi

echo "$bin"
