#!/usr/bin/env bash
# The library crates as their users get them from crates.io:
#   1. every feature on its own builds, warning-free (cargo-hack; installed
#      from crates.io when missing);
#   2. each crate packages, and the packaged sources build (`cargo package`);
#   3. the declared `rust-version` builds them (when rustup can install it).
# Run by .ci/run after the lints; takes a few seconds when the target
# directory is warm, ~20 minutes on a cold one (see CONTRIBUTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says what it checks and, when the next starts, how long it took.
step() {
    if [[ -n ${step_name:-} ]]; then printf '== %s: %ds\n' "$step_name" $((SECONDS - step_start)); fi
    step_name=$*
    step_start=$SECONDS
    [[ -n $step_name ]] && printf '\n== %s\n' "$step_name"
    return 0
}

# Published packages, in dependency order (folder names stay outbox-*).
LIBS=(-p txoutbox-naming -p txoutbox-macros -p txoutbox-core -p txoutbox-sea-orm
      -p txoutbox-nats -p txoutbox-console -p txoutbox-axum -p txoutbox-testing -p txoutbox)

# 1. Features. `--no-dev-deps` builds each crate as a dependency, without the
# dev-dependencies whose features would hide a missing one (cargo-hack edits
# the manifests while it runs and puts them back). Clippy rather than check:
# the same build, and `-D warnings` fails on code dead under one feature set.
if ! cargo hack --version >/dev/null 2>&1; then
    step "installing cargo-hack"
    cargo install cargo-hack --locked --version '^0.6'
fi
step "features: each one on its own"
cargo hack clippy --each-feature --no-dev-deps \
    -p txoutbox-naming -p txoutbox-macros -p txoutbox-core -p txoutbox-sea-orm -p txoutbox-testing \
    -- -D warnings
# txoutbox-nats needs one TLS backend (async-nats refuses to build without
# one), and so do txoutbox-console and txoutbox-axum, which pass the choice
# on to it: every feature alone and in pairs, each set with `ring` or
# `aws-lc-rs`.
step "features: txoutbox-nats, txoutbox-console and txoutbox-axum, with either TLS backend"
cargo hack clippy --feature-powerset --depth 2 --at-least-one-of ring,aws-lc-rs \
    --exclude-features default --no-dev-deps -p txoutbox-nats -p txoutbox-console -p txoutbox-axum \
    -- -D warnings
# The facade: each feature alone, and with `nats` (the TLS backend's features
# are each other's alternatives: `nats-aws-lc-rs` alone).
step "features: txoutbox, each one on its own"
cargo hack clippy --each-feature --no-dev-deps -p txoutbox -- -D warnings

# 2. Packages. One `cargo package` for all of them: it packages them in
# dependency order into a local registry overlay, so each one verifies
# (builds from its .crate) against the others before any is on crates.io.
# `--allow-dirty`: CI checks the tree it is given, committed or not.
# A packaged crate is built as its own workspace, without this one's
# profile: here without debug info, as the workspace builds its
# dependencies (nothing here is ever run under a debugger).
step "cargo package"
CARGO_PROFILE_DEV_DEBUG=false cargo package --allow-dirty "${LIBS[@]}" -p txoutbox-cli

# 3. MSRV: the workspace's `rust-version`, with the toolchain of that version.
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
if command -v rustup >/dev/null 2>&1 && rustup toolchain install "$msrv" --profile minimal >/dev/null 2>&1; then
    step "rust-version $msrv"
    cargo +"$msrv" check --locked "${LIBS[@]}" -p txoutbox-cli \
        --features txoutbox-core/serde,txoutbox-core/opentelemetry \
        --features txoutbox-sea-orm/postgres,txoutbox-sea-orm/mysql,txoutbox-sea-orm/sqlite,txoutbox-sea-orm/serde \
        --features txoutbox-nats/serde,txoutbox-testing/nats-server \
        --features txoutbox/postgres,txoutbox/mysql,txoutbox/sqlite,txoutbox/nats,txoutbox/testing \
        --features txoutbox/console
else
    echo "warning: rustup cannot install Rust $msrv here: rust-version $msrv NOT checked" >&2
fi
step ""
