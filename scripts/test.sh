#!/usr/bin/env bash
# The whole test suite: starts PostgreSQL, MariaDB and NATS (JetStream) if
# they are down (saying what to install when a binary is missing), then runs
# every test of the workspace against them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-services.sh
exec cargo test --workspace "$@"
