#!/usr/bin/env bash
# Builds every fuzz target in fuzz/ and runs each for a short while (FUZZ_SECONDS, default 20)
# on a scratch copy of its committed seed corpus (fuzz/corpus/<target>/ is never written to).
# Exits non-zero, naming the target and the saved input, as soon as a target crashes, panics,
# leaks or times out. What it runs: `cargo fuzz run <target> <scratch> fuzz/corpus/<target>
# -- -max_total_time=N -timeout=10 -rss_limit_mb=2048`, one target at a time.
#
# Toolchain: cargo-fuzz needs nightly features. A `nightly` rustup toolchain is used when one is
# installed; otherwise the stable one with RUSTC_BOOTSTRAP=1. cargo-fuzz itself is installed
# from crates.io (`cargo install cargo-fuzz --locked`) when missing.
# Usage: fuzz/run-briefly.sh [target ...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")"

say() { printf 'fuzz: %s\n' "$*"; }
seconds=${FUZZ_SECONDS:-20}

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  say "cargo-fuzz: missing; cargo install cargo-fuzz --locked"
  cargo install cargo-fuzz --locked
fi
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  cargo_fuzz=(cargo +nightly fuzz)
  say "toolchain: $(rustup run nightly rustc --version)"
else
  export RUSTC_BOOTSTRAP=1
  cargo_fuzz=(cargo fuzz)
  say "toolchain: $(rustc --version) with RUSTC_BOOTSTRAP=1 (no nightly installed)"
fi

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <("${cargo_fuzz[@]}" list)
fi
say "building ${targets[*]} (release, debug assertions and overflow checks, address sanitizer)"
"${cargo_fuzz[@]}" build

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for target in "${targets[@]}"; do
  seeds="corpus/$target"
  if [ ! -d "$seeds" ] || [ -z "$(ls -A "$seeds")" ]; then
    say "$target: no seed corpus in fuzz/$seeds"
    exit 1
  fi
  dict=()
  if [ -f "dict/$target.dict" ]; then dict=("-dict=dict/$target.dict"); fi
  mkdir -p "$scratch/$target"
  say "$target: ${seconds}s from $(ls "$seeds" | wc -l) seeds"
  if ! "${cargo_fuzz[@]}" run "$target" "$scratch/$target" "$seeds" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      "${dict[@]}" >"$scratch/$target.log" 2>&1; then
    tail -n 60 "$scratch/$target.log"
    say "$target: FAILED; the input that broke it is under fuzz/artifacts/$target/"
    exit 1
  fi
  stats=$(grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' \
    "$scratch/$target.log" | sed 's/^stat:://' | tr -s ' ' | paste -sd ' ' -)
  coverage=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$scratch/$target.log" | tail -n 1)
  say "$target: ok ($coverage; $stats)"
done
say "every target ran ${seconds}s without a crash: ${targets[*]}"
