#!/usr/bin/env bash
# Builds a Kubernetes control plane from Go modules at pinned versions, for the tests that run
# against a real API server (testkit/): etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler, into a cache directory keyed by version. What is already built is skipped.
#
#   scripts/install-control-plane.sh [VERSION]      # default: 1.28.15, the floor we support
#   scripts/install-control-plane.sh 1.37.2         # the newest release the Go proxy serves
#
# Prints the directory holding the binaries on its last line. The tests look in
# $LIGHTSOUT_CONTROL_PLANE_DIR/v<VERSION>/bin (version from $LIGHTSOUT_KUBE_VERSION, default
# 1.28.15); the cache defaults to /var/cache/lightsout/control-plane as root, else
# ~/.cache/lightsout/control-plane. Needs Go (1.26 builds 1.28 through 1.37) and the Go
# module proxy. With nothing cached, 1.28.15 takes about 9 minutes on 2 cores; cached, 0.3 s.
set -euo pipefail

version="${1:-${LIGHTSOUT_KUBE_VERSION:-1.28.15}}"
version="${version#v}"
minor="$(echo "$version" | cut -d. -f2)"

# etcd per Kubernetes minor: the 3.5 line up to 1.33 (as those releases ship), 3.6 after.
if [ "$minor" -le 33 ]; then
  etcd_version="3.5.21"
else
  etcd_version="3.6.5"
fi

if [ -n "${LIGHTSOUT_CONTROL_PLANE_DIR:-}" ]; then
  cache="$LIGHTSOUT_CONTROL_PLANE_DIR"
elif [ "$(id -u)" = 0 ]; then
  cache=/var/cache/lightsout/control-plane
else
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/lightsout/control-plane"
fi
out="$cache/v$version"
bin="$out/bin"
mkdir -p "$bin"

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
command -v go >/dev/null || { echo "install-control-plane: Go is not installed (go version)" >&2; exit 2; }

built() { [ -x "$bin/$1" ] && [ -f "$bin/$1.built" ] && [ "$(cat "$bin/$1.built")" = "$2" ]; }

# etcd: its own module, so its dependencies are resolved apart from Kubernetes'.
if built etcd "etcd v$etcd_version"; then
  echo "etcd v$etcd_version: cached"
else
  work="$out/build-etcd"
  rm -rf "$work" && mkdir -p "$work" && cd "$work"
  cat >go.mod <<EOF
module lightsout.dev/control-plane/etcd

go 1.22
EOF
  go get "go.etcd.io/etcd/server/v3@v$etcd_version"
  go build -trimpath -ldflags '-s -w' -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$bin/etcd.tmp" "$bin/etcd"
  echo "etcd v$etcd_version" >"$bin/etcd.built"
  cd / && rm -rf "$work"
fi

# Kubernetes: k8s.io/kubernetes requires its staging modules (k8s.io/api, client-go, ...) at
# v0.0.0 and replaces them with ./staging paths that a dependency cannot use; they are
# published as k8s.io/<name> v0.<minor>.<patch>, so every such replace points there instead.
components=(kube-apiserver kube-controller-manager kube-scheduler)
missing=()
for c in "${components[@]}"; do built "$c" "v$version" || missing+=("$c"); done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "kubernetes v$version: cached"
else
  work="$out/build-kubernetes"
  rm -rf "$work" && mkdir -p "$work" && cd "$work"
  gomod="$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  go_line="$(grep -m1 '^go ' "$gomod")"
  staging="v0.${version#1.}"
  {
    echo "module lightsout.dev/control-plane/kubernetes"
    echo
    echo "$go_line"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9.-]*\) => ./staging/src/k8s.io/[a-z0-9.-]*$#\t\1 => \1 '"$staging"'#p' "$gomod"
    echo ")"
  } >go.mod
  # Each package at the pinned version: a bare path would upgrade k8s.io/kubernetes to latest.
  pkgs=()
  for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c@v$version"); done
  go get "${pkgs[@]}"
  # The version a release build stamps in: helm's kubeVersion checks and kubectl read it.
  ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=v$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldflags="$ldflags -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  for c in "${missing[@]}"; do
    start=$(date +%s)
    go build -trimpath -ldflags "$ldflags" -o "$bin/$c.tmp" "k8s.io/kubernetes/cmd/$c"
    mv "$bin/$c.tmp" "$bin/$c"
    echo "v$version" >"$bin/$c.built"
    echo "$c v$version: built in $(( $(date +%s) - start )) s"
  done
  cd / && rm -rf "$work"
fi

"$bin/kube-apiserver" --version
echo "$bin"
