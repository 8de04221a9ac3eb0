#!/usr/bin/env bash
# The supply chain of every crate the workspace pulls in (deny.toml):
# licences (permissive only), sources (crates.io only, no git), wildcard
# versions refused, duplicate versions reported. Installs cargo-deny from
# crates.io when missing (a few minutes, once per machine).
#
# Advisories (`cargo deny check advisories`) need the RustSec database,
# cloned from GitHub; this project's machines reach only the package
# registries, so CI cannot check them: run `scripts/check-supply-chain.sh
# advisories` where GitHub is reachable, and before each release.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo deny --version >/dev/null 2>&1; then
    printf 'check-supply-chain: installing cargo-deny\n' >&2
    cargo install cargo-deny --locked --version '^0.20'
fi
if [ $# -gt 0 ]; then
    cargo deny check "$@"
else
    cargo deny check licenses bans sources
fi
