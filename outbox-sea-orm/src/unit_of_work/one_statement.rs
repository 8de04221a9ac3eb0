//! Committing a unit of work that never needed an open transaction as one
//! statement, which the database commits on its own: no `BEGIN`, no
//! `COMMIT`, one round trip instead of four for "save an aggregate and its
//! events".

use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult};
use txoutbox_core::{MessageId, OutboxMessage};
use uuid::Uuid;

use super::write::AggregateWrite;
use crate::config::TableName;
use crate::dialect::{Dialect, Sql};
use crate::error::OutboxError;
use crate::row::{
    LEASED_AT_COMMIT, LeaseAtCommit, as_stored, fit_one_insert, insert_messages, push_insert,
};

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
/// either commits whole or not at all. With `leased` (PostgreSQL), the
/// messages are written leased at commit where order allows (see
/// [`push_insert`]); returns the ids of those so written. Call only when
/// [`fits`] says so.
pub(super) async fn commit(
    db: &DatabaseConnection,
    table: &TableName,
    write: Option<AggregateWrite>,
    messages: &mut [OutboxMessage],
    leased: Option<LeaseAtCommit>,
) -> Result<Vec<MessageId>, OutboxError> {
    let leased = leased.filter(|_| !messages.is_empty());
    let write = match write {
        None if leased.is_none() => {
            insert_messages(db, table, messages).await?;
            return Ok(Vec::new());
        }
        Some(write) if messages.is_empty() => {
            write.execute(db, table).await?;
            return Ok(Vec::new());
        }
        write => write,
    };
    let dialect = Dialect::of(db.get_database_backend());
    as_stored(dialect, messages);
    let (mut sql, check) = match write {
        Some(write) => {
            let (statement, check) = write.returning_a_row();
            let (mut sql, written) = Sql::embedding(statement);
            sql.push(&format!("WITH {WRITTEN} AS ({written}) "));
            (sql, Some(check))
        }
        None => (Sql::new(dialect), None),
    };
    push_insert(
        &mut sql,
        table,
        messages,
        check.as_ref().map(|_| WRITTEN),
        leased,
    )?;
    let refused = |err| match &check {
        Some(check) => check.refused(err, table),
        None => err.into(),
    };
    let (applied, written_leased) = if leased.is_none() {
        let result = db.execute_raw(sql.build()).await.map_err(refused)?;
        (result.rows_affected() > 0, Vec::new())
    } else {
        let rows = db.query_all_raw(sql.build()).await.map_err(refused)?;
        (!rows.is_empty(), leased_ids(&rows)?)
    };
    match &check {
        Some(check) if !applied => Err(check.conflict()),
        _ => Ok(written_leased),
    }
}

/// The ids of the rows a leased INSERT returned as written leased.
fn leased_ids(rows: &[QueryResult]) -> Result<Vec<MessageId>, OutboxError> {
    let mut ids = Vec::new();
    for row in rows {
        if row.try_get::<bool>("", LEASED_AT_COMMIT)? {
            ids.push(MessageId::from(row.try_get::<Uuid>("", "id")?));
        }
    }
    Ok(ids)
}
