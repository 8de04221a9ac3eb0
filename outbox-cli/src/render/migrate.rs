//! `outbox migrate`.

use std::fmt::{Display, Write as _};

/// Nothing to apply: the `count` migrations of `table` and `inbox_table`
/// are.
pub(crate) fn up_to_date(count: usize, table: impl Display, inbox_table: impl Display) -> String {
    format!("up to date: the {count} migrations of {table} and {inbox_table} are applied\n")
}

/// The migrations applied.
pub(crate) fn applied(names: &[String]) -> String {
    let mut out = format!("applied {} migration(s):\n", names.len());
    for name in names {
        let _ = writeln!(out, "  {name}");
    }
    out
}
