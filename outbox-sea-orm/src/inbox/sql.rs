//! The inbox table's statements.

use std::collections::HashSet;
use std::time::Duration;

use sea_orm::{ConnectionTrait, DbErr};
use txoutbox_core::MessageId;

use crate::dialect::{Dialect, Sql};

/// Records `(consumer, id)` as processed now. Fails with a unique violation
/// when it already is (or, on PostgreSQL and MySQL/MariaDB, after waiting
/// for a concurrent transaction that inserted it to commit). With
/// `idle_limit`, on PostgreSQL, the same statement bounds how long the
/// transaction may then sit idle (see [`limit_idle`]).
pub(super) async fn insert(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    id: MessageId,
    event_name: &str,
    idle_limit: Option<Duration>,
) -> Result<(), DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    let columns = format!(
        "INSERT INTO {} (consumer, message_id, event_name, processed_at) ",
        dialect.quote(table)
    );
    let limited = match idle_limit {
        Some(limit) if dialect == Dialect::Postgres => {
            // One round trip: the setting is made by the statement's CTE.
            sql.push(&format!("WITH bound AS (SELECT {IDLE_SETTING}"));
            sql.bind(idle_millis(limit)).push(", true)) ");
            sql.push(&columns).push("SELECT ");
            true
        }
        _ => {
            sql.push(&columns).push("VALUES (");
            false
        }
    };
    sql.bind(consumer).push(", ");
    sql.bind(*id.as_uuid()).push(", ");
    sql.bind(event_name);
    sql.push(&format!(", {}", dialect.now()));
    sql.push(if limited { " FROM bound" } else { ")" });
    db.execute_raw(sql.build()).await.map(|_| ())
}

/// `set_config` of PostgreSQL's idle-in-transaction timeout, for the
/// current transaction only; its one argument the milliseconds as text.
const IDLE_SETTING: &str = "set_config('idle_in_transaction_session_timeout', ";

/// The timeout's value: whole milliseconds, at least 1 (0 would turn it
/// off), as `set_config` takes it.
fn idle_millis(limit: Duration) -> String {
    limit.as_millis().clamp(1, i32::MAX as u128).to_string()
}

/// On PostgreSQL, ends the session of the transaction `txn` should it sit
/// idle longer than `limit` (`idle_in_transaction_session_timeout`, set
/// for this transaction only): a process frozen with the transaction
/// open then holds its rows no longer than that. Other databases: nothing
/// (MySQL/MariaDB have only session-wide settings, which would outlive the
/// transaction on a pooled connection).
pub(super) async fn limit_idle(txn: &impl ConnectionTrait, limit: Duration) -> Result<(), DbErr> {
    let dialect = Dialect::of(txn.get_database_backend());
    if dialect != Dialect::Postgres {
        return Ok(());
    }
    let mut sql = Sql::new(dialect);
    sql.push(&format!("SELECT {IDLE_SETTING}"));
    sql.bind(idle_millis(limit)).push(", true)");
    txn.execute_raw(sql.build()).await.map(|_| ())
}

/// Those of `ids` recorded for `consumer`.
pub(super) async fn recorded(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    ids: &[MessageId],
) -> Result<HashSet<MessageId>, DbErr> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "SELECT message_id FROM {} WHERE consumer = ",
        dialect.quote(table)
    ));
    sql.bind(consumer)
        .push(" AND message_id IN ")
        .bind_list(ids.iter().map(|id| *id.as_uuid()));
    db.query_all_raw(sql.build())
        .await?
        .iter()
        .map(|row| {
            row.try_get::<uuid::Uuid>("", "message_id")
                .map(MessageId::from_uuid)
        })
        .collect()
}

/// How many of `ids` (distinct) are recorded for `consumer`, as `db` sees
/// them: in an inbox transaction, the rows it recorded itself. One
/// statement per 1,000 ids.
pub(super) async fn count_recorded(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    ids: &[MessageId],
) -> Result<u64, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut found = 0;
    for chunk in ids.chunks(ROWS_PER_RECORD) {
        let mut sql = Sql::new(dialect);
        sql.push(&format!(
            "SELECT COUNT(*) AS n FROM {} WHERE consumer = ",
            dialect.quote(table)
        ));
        sql.bind(consumer)
            .push(" AND message_id IN ")
            .bind_list(chunk.iter().map(|id| *id.as_uuid()));
        if let Some(row) = db.query_one_raw(sql.build()).await? {
            found += u64::try_from(row.try_get::<i64>("", "n")?).unwrap_or(0);
        }
    }
    Ok(found)
}

/// Deletes up to `batch` of `consumer`'s rows processed more than
/// `older_than` ago (by the database clock); returns how many it deleted.
pub(super) async fn purge_batch(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    older_than: Duration,
    batch: u32,
) -> Result<u64, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let table = dialect.quote(table);
    let ago = -crate::dialect::millis(older_than);
    let mut sql = Sql::new(dialect);
    // Placeholders are bound in the order they appear (`?` is positional).
    let filter = |sql: &mut Sql| {
        let owner = sql.param(consumer);
        let ago = sql.param(ago);
        format!(
            "consumer = {owner} AND processed_at < {}",
            dialect.now_plus_millis(&ago)
        )
    };
    match dialect {
        // MySQL cannot delete from a table it selects from in a subquery,
        // but has DELETE ... ORDER BY ... LIMIT.
        Dialect::MySql => {
            let filter = filter(&mut sql);
            let limit = sql.param(i64::from(batch));
            sql.push(&format!(
                "DELETE FROM {table} WHERE {filter} ORDER BY processed_at LIMIT {limit}"
            ));
        }
        _ => {
            let owner = sql.param(consumer);
            let filter = filter(&mut sql);
            let limit = sql.param(i64::from(batch));
            sql.push(&format!(
                "DELETE FROM {table} WHERE consumer = {owner} AND message_id IN \
                 (SELECT message_id FROM {table} WHERE {filter} LIMIT {limit})"
            ));
        }
    }
    Ok(db.execute_raw(sql.build()).await?.rows_affected())
}

/// Counts `consumer`'s rows processed more than `older_than` ago.
pub(super) async fn count_before(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    older_than: Duration,
) -> Result<u64, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    let owner = sql.param(consumer);
    let ago = sql.param(-crate::dialect::millis(older_than));
    sql.push(&format!(
        "SELECT COUNT(*) AS n FROM {} WHERE consumer = {owner} AND processed_at < {}",
        dialect.quote(table),
        dialect.now_plus_millis(&ago)
    ));
    let Some(row) = db.query_one_raw(sql.build()).await? else {
        return Ok(0);
    };
    Ok(u64::try_from(row.try_get::<i64>("", "n")?).unwrap_or(0))
}

/// Rows per multi-row inbox insert: more than a group holds by default
/// (256), so a full group is recorded in one statement; 3 parameters
/// each, 3,000 in all, well under every backend's limit (SQLite's 32,766).
const ROWS_PER_RECORD: usize = 1000;

/// Records `(consumer, id)` for each of `entries` (distinct ids) in `txn`,
/// skipping the ids recorded before without failing the transaction;
/// returns the ids it recorded.
///
/// PostgreSQL and SQLite: one `INSERT .. ON CONFLICT DO NOTHING RETURNING`
/// per 1,000 rows (a row a concurrent transaction is inserting is waited
/// for, then skipped). MySQL/MariaDB, which cannot return the rows an
/// insert skipped: the recorded ids are read first, then the others
/// inserted; should a concurrent transaction record one of them in
/// between, the insert fails with a unique violation (the statement alone
/// is undone) and the group is tried again later.
pub(super) async fn record_new(
    txn: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    entries: &[(MessageId, &str)],
) -> Result<HashSet<MessageId>, DbErr> {
    let dialect = Dialect::of(txn.get_database_backend());
    let mut new = HashSet::with_capacity(entries.len());
    if dialect == Dialect::MySql {
        let ids: Vec<MessageId> = entries.iter().map(|(id, _)| *id).collect();
        let before = recorded(txn, table, consumer, &ids).await?;
        let fresh: Vec<(MessageId, &str)> = entries
            .iter()
            .filter(|(id, _)| !before.contains(id))
            .copied()
            .collect();
        for chunk in fresh.chunks(ROWS_PER_RECORD) {
            txn.execute_raw(insert_rows(dialect, table, consumer, chunk, "").build())
                .await?;
            new.extend(chunk.iter().map(|(id, _)| *id));
        }
        return Ok(new);
    }
    for chunk in entries.chunks(ROWS_PER_RECORD) {
        let sql = insert_rows(
            dialect,
            table,
            consumer,
            chunk,
            " ON CONFLICT DO NOTHING RETURNING message_id",
        );
        for row in txn.query_all_raw(sql.build()).await? {
            new.insert(MessageId::from_uuid(
                row.try_get::<uuid::Uuid>("", "message_id")?,
            ));
        }
    }
    Ok(new)
}

/// `INSERT INTO <table> (..) VALUES (..), (..)<tail>` for `rows`.
fn insert_rows(
    dialect: Dialect,
    table: &str,
    consumer: &str,
    rows: &[(MessageId, &str)],
    tail: &str,
) -> Sql {
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "INSERT INTO {} (consumer, message_id, event_name, processed_at) VALUES ",
        dialect.quote(table)
    ));
    for (n, (id, event_name)) in rows.iter().enumerate() {
        if n > 0 {
            sql.push(", ");
        }
        sql.push("(").bind(consumer).push(", ");
        sql.bind(*id.as_uuid()).push(", ");
        sql.bind(*event_name);
        sql.push(&format!(", {})", dialect.now()));
    }
    sql.push(tail);
    sql
}
