#!/usr/bin/env bash
# The fuzz targets (fuzz/, cargo-fuzz on libFuzzer), each for a bounded time:
# builds every target once, then runs each from its committed seed corpus
# (fuzz/corpus/<target>, only read: what a run finds goes to a scratch
# directory that is thrown away) for FUZZ_SECONDS seconds (default 45), and
# prints per target the runs executed. Fails when any target crashes,
# panics, leaks, hangs (an input over 20 s) or runs out of memory; libFuzzer
# keeps the input in fuzz/artifacts/<target>/ and its log is printed.
#
# Usage: scripts/fuzz.sh [TARGET...]     every target when none is named
#        FUZZ_SECONDS=600 scripts/fuzz.sh envelope_decode
#        FUZZ_SEED=1 FUZZ_RUNS=200000 scripts/fuzz.sh   (CI: the same run everywhere)
#        scripts/fuzz.sh --list
#
# Needs the nightly toolchain (installed with rustup when missing) and
# cargo-fuzz (installed with `cargo install cargo-fuzz --locked` when
# missing). Longer runs, and what each target checks: CONTRIBUTING.md,
# "Fuzzing".
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-45}
# FUZZ_RUNS: this many inputs per target instead of FUZZ_SECONDS; with
# FUZZ_SEED, a run that is the same on every machine (what CI runs).
bound=(-max_total_time="$seconds")
if [ -n "${FUZZ_RUNS:-}" ]; then bound=(-runs="$FUZZ_RUNS"); fi
if [ -n "${FUZZ_SEED:-}" ]; then bound+=(-seed="$FUZZ_SEED"); fi
# No AddressSanitizer by default: the crates forbid unsafe code, what is
# hunted is panics and broken properties, and without it a target runs about
# four times as many inputs (envelope_decode: 29,000 a second against 8,500).
# FUZZ_SANITIZER=address brings it back.
sanitizer=${FUZZ_SANITIZER:-none}

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

all=$(cargo +nightly fuzz list)
if [ "${1:-}" = --list ]; then
  printf '%s\n' "$all"
  exit 0
fi
if [ $# -gt 0 ]; then
  for target in "$@"; do
    if ! grep -qx "$target" <<<"$all"; then
      printf 'fuzz.sh: no target `%s`; the targets:\n%s\n' "$target" "$all" >&2
      exit 2
    fi
  done
  targets=("$@")
else
  mapfile -t targets <<<"$all"
fi

started=$SECONDS
# `cargo fuzz build` builds one target, or every one.
if [ ${#targets[@]} -eq 1 ]; then
  cargo +nightly fuzz build --sanitizer "$sanitizer" "${targets[0]}"
else
  cargo +nightly fuzz build --sanitizer "$sanitizer"
fi
printf 'fuzz.sh: built %d targets in %d s\n' "${#targets[@]}" $((SECONDS - started)) >&2

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=()
for target in "${targets[@]}"; do
  mkdir -p "$scratch/$target"
  log=$scratch/$target.log
  if cargo +nightly fuzz run --sanitizer "$sanitizer" "$target" \
      "$scratch/$target" "fuzz/corpus/$target" -- \
      "${bound[@]}" -timeout=20 -rss_limit_mb=2048 \
      -print_final_stats=1 >"$log" 2>&1; then
    runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
    corpus=$(ls "$scratch/$target" | wc -l)
    printf 'fuzz.sh: %-18s %10s runs (%s), %s new inputs\n' \
      "$target" "${runs:-?}" "${bound[*]}" "$corpus" >&2
  else
    tail -n 60 "$log" >&2
    printf 'fuzz.sh: %s FAILED: the input is in fuzz/artifacts/%s/\n' "$target" "$target" >&2
    failed+=("$target")
  fi
done
printf 'fuzz.sh: %d targets in %d s\n' "${#targets[@]}" $((SECONDS - started)) >&2
if [ ${#failed[@]} -gt 0 ]; then
  printf 'fuzz.sh: failed: %s\n' "${failed[*]}" >&2
  exit 1
fi
