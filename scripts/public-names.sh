#!/usr/bin/env bash
# Lists the public items of the library crates (outbox-core, outbox-sea-orm,
# outbox-nats, outbox-axum, outbox-console, outbox-testing, outbox-naming) and fails when two of them share
# a name: a facade re-exporting them, or a reader importing from two crates,
# must never meet two things called the same.
#
# An item is a `pub struct|enum|trait|type|fn|const|static|mod|union` at the
# start of a line (module level; methods and test modules are indented, and
# the workspace's `unreachable_pub` lint keeps module-level `pub` items
# reachable). `pub use` re-exports are not items of their own.
#
# Usage: scripts/public-names.sh [--list]
set -euo pipefail
cd "$(dirname "$0")/.."

crates=(outbox-core outbox-sea-orm outbox-nats outbox-axum outbox-console outbox-testing outbox-naming)

# Names that may repeat, each with why:
# - ReadmeDoctests, CrateReadmeDoctests: `#[cfg(doctest)]` only, never built
#   into a library;
# - __private: `#[doc(hidden)]`, for the derives' generated code only;
# - metrics: documentation-only modules (the metric names), always read as
#   `processor::metrics` and `subscriber::metrics`;
# - SUBJECT: header-name constants, always read qualified: the envelope's
#   `wire::SUBJECT` (`ce-subject`) and the dead letter's
#   `subscriber::dead_lettering::SUBJECT` (`Outbox-Dead-Subject`).
allowed='^(ReadmeDoctests|CrateReadmeDoctests|__private|metrics|SUBJECT)$'

items() {
    for crate in "${crates[@]}"; do
        grep -rnoE '^pub (async )?(struct|enum|trait|type|fn|const|static|mod|union) [A-Za-z_][A-Za-z0-9_]*' \
            --include='*.rs' "$crate/src" |
            sed -E 's/^([^:]*):[0-9]+:pub (async )?([a-z]+) (.*)$/\4 \3 \1/'
    done | sort
}

if [[ "${1:-}" == "--list" ]]; then
    items
    exit 0
fi

duplicates=$(items | awk '{print $1}' | uniq -d | grep -vE "$allowed" || true)
if [[ -n "$duplicates" ]]; then
    echo "public names used more than once across the library crates:" >&2
    for name in $duplicates; do
        items | awk -v n="$name" '$1 == n { print "  " $0 }' >&2
    done
    exit 1
fi
echo "public names: $(items | wc -l) items in ${#crates[@]} crates, no name used twice"
