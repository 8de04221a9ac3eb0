//! Committing a unit of work that never needed an open transaction as one
//! statement, which the database commits on its own: no `BEGIN`, no
//! `COMMIT`, one round trip instead of four for "save an aggregate and its
//! events".

use outbox_core::OutboxMessage;
use sea_orm::{ConnectionTrait, DatabaseConnection};

use super::write::AggregateWrite;
use crate::config::TableName;
use crate::dialect::{Dialect, Sql};
use crate::error::OutboxError;
use crate::row::{as_stored, fit_one_insert, insert_messages, push_insert};

/// The name of the aggregate write's common table expression.
const WRITTEN: &str = "aggregate_written";

/// Whether a unit holding `writes` aggregate writes and `messages` messages
/// can commit as one statement: at most one write and one INSERT's worth of
/// messages, and on MySQL/MariaDB and SQLite (no data-modifying common table
/// expressions) not both a write and messages.
pub(super) fn fits(dialect: Dialect, writes: usize, messages: usize) -> bool {
    writes <= 1
        && fit_one_insert(messages)
        && (dialect == Dialect::Postgres || writes == 0 || messages == 0)
}

/// Commits `write` (if any) and `messages` in one statement on `db`. On
/// PostgreSQL both go together as
/// `WITH aggregate_written AS (<write> RETURNING 1) INSERT … WHERE EXISTS (SELECT 1 FROM aggregate_written)`:
/// the messages are inserted only if the write applied, and a statement
/// either commits whole or not at all. Call only when [`fits`] says so.
pub(super) async fn commit(
    db: &DatabaseConnection,
    table: &TableName,
    write: Option<AggregateWrite>,
    messages: &mut [OutboxMessage],
) -> Result<(), OutboxError> {
    let Some(write) = write else {
        return insert_messages(db, table, messages).await;
    };
    if messages.is_empty() {
        return write.execute(db, table).await;
    }
    let dialect = Dialect::of(db.get_database_backend());
    as_stored(dialect, messages);
    let (statement, check) = write.returning_a_row();
    let (mut sql, written) = Sql::embedding(statement);
    sql.push(&format!("WITH {WRITTEN} AS ({written}) "));
    push_insert(&mut sql, table, messages, Some(WRITTEN))?;
    match db.execute_raw(sql.build()).await {
        Ok(result) if result.rows_affected() == 0 => Err(check.conflict()),
        Ok(_) => Ok(()),
        Err(err) => Err(check.refused(err, table)),
    }
}
