#!/usr/bin/env bash
# Fuzzes Lightsout's parsers of untrusted text (fuzz/: review.md, JSON findings, judge answers,
# dataset lines, server-sent events) for SECONDS_PER_TARGET seconds each (default 60), one
# target after another. Installs nightly Rust and cargo-fuzz when missing.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]
#
# Each target starts from its committed seeds (fuzz/corpus/<target>/) plus what earlier runs on
# this machine found (fuzz/target/corpus/<target>/, not committed). A crash stops the script
# with a non-zero status; libFuzzer saves the input under fuzz/artifacts/<target>/ and prints
# how to reproduce it (`cargo +nightly fuzz run <target> <file>`). Inputs that take over 10 s
# count as crashes too (a hang is a denial of service for a run).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo +nightly install cargo-fuzz --locked
fi

# Overflow checks and debug assertions on: an arithmetic overflow is a finding. No sanitizer:
# the targets are safe Rust, so coverage-guided speed matters more than AddressSanitizer.
flags=(--sanitizer none --debug-assertions)
cargo +nightly fuzz build "${flags[@]}"
for target in $(cargo +nightly fuzz list); do
  corpus="fuzz/target/corpus/$target"
  mkdir -p "$corpus"
  echo "fuzzing $target for ${seconds}s"
  cargo +nightly fuzz run "${flags[@]}" "$target" "$corpus" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
done
