//! [`MissingSchema`]: the table a store needs is not there, or not all of it.

/// The table a store (or an inbox) works on is missing, or lacks columns
/// this version needs (a migration has not run): what the store's schema
/// check ([`OutboxStore::check_schema`](super::OutboxStore::check_schema))
/// found, with what to run. Running again does not cure it: the processor
/// stops with it ([`ProcessorError::MissingSchema`](crate::processor::ProcessorError::MissingSchema)).
///
/// ```
/// use txoutbox_core::store::MissingSchema;
/// let missing = MissingSchema::Table {
///     table: "outbox_messages".into(),
///     remedy: "run `outbox migrate`".into(),
/// };
/// assert_eq!(
///     missing.to_string(),
///     "table `outbox_messages` does not exist: run `outbox migrate`"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MissingSchema {
    /// The table does not exist.
    #[error("table `{table}` does not exist: {remedy}")]
    Table {
        /// The table.
        table: String,
        /// What creates it.
        remedy: String,
    },
    /// The table lacks columns (an older schema).
    #[error("table `{table}` lacks the column(s) {}: {remedy}", .columns.join(", "))]
    Columns {
        /// The table.
        table: String,
        /// The missing columns.
        columns: Vec<String>,
        /// What adds them (the migration that has not run).
        remedy: String,
    },
}
