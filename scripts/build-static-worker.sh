#!/usr/bin/env bash
# Builds lightsout-worker as one static executable (glibc linked in, no ELF interpreter, no shared
# libraries), the binary a trial pod's init container copies into the task's image: task images
# bring their own libc, or none we can rely on.
#
#   scripts/build-static-worker.sh [--profile release|dev] [--check]
#
# Prints the binary's path. --check also proves it: no interpreter and no NEEDED entries, and it
# runs in an empty root directory (chroot; needs root) and resolves a host name through that
# root's /etc/hosts, which is what a worker in a foreign image does first.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
check=false
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --check) check=true; shift ;;
    *) echo "usage: $0 [--profile release|dev] [--check]" >&2; exit 2 ;;
  esac
done

target=x86_64-unknown-linux-gnu
# A separate target dir: crt-static changes every crate's flags, and sharing target/ would make
# the ordinary build and this one rebuild each other.
RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR=target/static \
  cargo build --locked --profile "$profile" -p lightsout-worker --target "$target" >&2
dir=$profile
[ "$profile" = dev ] && dir=debug
bin="target/static/$target/$dir/lightsout-worker"

if $check; then
  if readelf -l "$bin" | grep -q 'program interpreter'; then
    echo "FAIL: $bin has an ELF interpreter (dynamically linked)" >&2; exit 1
  fi
  if readelf -d "$bin" | grep -q '(NEEDED)'; then
    echo "FAIL: $bin needs shared libraries:" >&2; readelf -d "$bin" | grep '(NEEDED)' >&2; exit 1
  fi
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  mkdir -p "$root/etc"
  printf '127.0.0.1 localhost\n127.0.0.1 s3.lightsout.test\n' > "$root/etc/hosts"
  printf 'hosts: files\n' > "$root/etc/nsswitch.conf"
  cp "$bin" "$root/lightsout-worker"
  version=$(chroot "$root" /lightsout-worker --version)
  resolved=$(chroot "$root" /lightsout-worker resolve s3.lightsout.test:9000)
  case "$resolved" in
    *127.0.0.1:9000*) ;;
    *) echo "FAIL: the static worker resolved s3.lightsout.test to '$resolved'" >&2; exit 1 ;;
  esac
  echo "static worker OK: $version; runs in an empty root; resolves through /etc/hosts ($resolved)" >&2
fi
echo "$bin"
