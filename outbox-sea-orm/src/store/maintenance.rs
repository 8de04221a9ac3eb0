//! Maintenance: requeue dead messages, purge old published ones (skipped
//! ones with them), count what is due.

use std::time::Duration;

use sea_orm::ConnectionTrait;
use txoutbox_core::StoreError;
use txoutbox_core::store::DeadSelector;

use super::{SeaOrmOutboxStore, store_err};
use crate::dialect::millis;
use crate::dialect::{Dialect, Sql};

/// Dead back to pending, attempts and abandoned claims reset, due now.
pub(super) async fn requeue_dead(
    store: &SeaOrmOutboxStore,
    selector: DeadSelector,
) -> Result<u64, StoreError> {
    let dialect = store.dialect;
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "UPDATE {} SET status = 0, attempts = 0, abandoned = 0, next_attempt_at = {}, \
         lease_token = NULL, lease_expires_at = NULL WHERE status = 2",
        store.table(),
        dialect.now()
    ));
    match selector {
        DeadSelector::All => {}
        DeadSelector::EventName(name) => {
            sql.push(" AND event_name = ").bind(name);
        }
        DeadSelector::Ids(ids) if ids.is_empty() => return Ok(0),
        DeadSelector::Ids(ids) => {
            sql.push(" AND id IN ")
                .bind_list(ids.iter().map(|id| *id.as_uuid()));
        }
        // A selector newer than this store: refuse rather than guess.
        other => {
            return Err(StoreError::msg(format!(
                "this store cannot requeue by {other:?}"
            )));
        }
    }
    let result = store
        .db
        .execute_raw(sql.build())
        .await
        .map_err(store_err("requeueing"))?;
    Ok(result.rows_affected())
}

/// Deletes published (and skipped) rows older than `older_than`,
/// `batch_size` at a time so no statement holds many locks or runs long;
/// calls `progress` with the running total after each batch.
pub(super) async fn purge_published(
    store: &SeaOrmOutboxStore,
    older_than: Duration,
    batch_size: u32,
    mut progress: impl FnMut(u64) + Send,
) -> Result<u64, StoreError> {
    let batch = u64::from(batch_size.max(1));
    let mut purged = 0;
    loop {
        let deleted = purge_batch(store, older_than, batch).await?;
        purged += deleted;
        progress(purged);
        if deleted < batch {
            tracing::debug!(purged, "outbox purged");
            return Ok(purged);
        }
    }
}

/// The filter of published rows older than `older_than` (its placeholder
/// bound in `sql`).
fn published_before(sql: &mut Sql, older_than: Duration) -> String {
    let dialect = sql.dialect();
    let ago = sql.param(-millis(older_than));
    format!(
        "status = 1 AND published_at < {}",
        dialect.now_plus_millis(&ago)
    )
}

/// Deletes up to `batch` published rows older than `older_than`.
async fn purge_batch(
    store: &SeaOrmOutboxStore,
    older_than: Duration,
    batch: u64,
) -> Result<u64, StoreError> {
    let dialect = store.dialect;
    let table = store.table();
    let mut sql = Sql::new(dialect);
    let filter = published_before(&mut sql, older_than);
    let limit = sql.param(i64::try_from(batch).unwrap_or(i64::MAX));
    sql.push(&match dialect {
        Dialect::MySql => {
            format!("DELETE FROM {table} WHERE {filter} ORDER BY published_at LIMIT {limit}")
        }
        _ => format!(
            "DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE {filter} LIMIT {limit})"
        ),
    });
    Ok(store
        .db
        .execute_raw(sql.build())
        .await
        .map_err(store_err("purging"))?
        .rows_affected())
}

/// How many published (and skipped) rows are older than `older_than` (a
/// count over the purge's index).
pub(super) async fn count_published(
    store: &SeaOrmOutboxStore,
    older_than: Duration,
) -> Result<u64, StoreError> {
    let mut sql = Sql::new(store.dialect);
    let filter = published_before(&mut sql, older_than);
    sql.push(&format!(
        "SELECT COUNT(*) AS n FROM {} WHERE {filter}",
        store.table()
    ));
    let read = store_err("counting published messages");
    match store.db.query_one_raw(sql.build()).await.map_err(&read)? {
        Some(row) => count(&row, "n").map_err(read),
        None => Ok(0),
    }
}

/// How many messages were published in each of the last `minutes`
/// minutes, by the database clock, the current minute first: one statement
/// reading the published rows of that span through the published index
/// (skipped messages are not counted). Zero when the store deletes
/// published rows rather than keeping them.
pub(super) async fn published_per_minute(
    store: &SeaOrmOutboxStore,
    minutes: u32,
) -> Result<Vec<u64>, StoreError> {
    if minutes == 0 {
        return Ok(Vec::new());
    }
    const MINUTE: i64 = 60_000;
    let dialect = store.dialect;
    let mut sql = Sql::new(dialect);
    // Placeholders in the order they appear ('?' on MySQL and SQLite).
    let counts: Vec<String> = (0..i64::from(minutes))
        .map(|minute| {
            let from = sql.param(-(minute + 1) * MINUTE);
            format!(
                "COUNT(CASE WHEN published_at >= {} THEN 1 END) AS m{minute}",
                dialect.now_plus_millis(&from)
            )
        })
        .collect();
    let oldest = sql.param(-i64::from(minutes) * MINUTE);
    sql.push(&format!(
        "SELECT {} FROM {} WHERE status = 1 AND skipped_at IS NULL AND published_at >= {}",
        counts.join(", "),
        store.table(),
        dialect.now_plus_millis(&oldest)
    ));
    let read = store_err("counting published messages per minute");
    let Some(row) = store.db.query_one_raw(sql.build()).await.map_err(&read)? else {
        return Ok(vec![0; minutes as usize]);
    };
    // Each count is of the span up to that minute's start: take the
    // differences.
    let mut cumulative = Vec::with_capacity(minutes as usize);
    for minute in 0..minutes {
        cumulative.push(count(&row, &format!("m{minute}")).map_err(&read)?);
    }
    let mut per_minute = Vec::with_capacity(cumulative.len());
    let mut before = 0;
    for total in cumulative {
        per_minute.push(total.saturating_sub(before));
        before = total;
    }
    Ok(per_minute)
}

/// Pending messages due now (leased or not) that no dead or backing-off
/// earlier message of their aggregate holds back.
pub(super) async fn due_now(store: &SeaOrmOutboxStore) -> Result<u64, StoreError> {
    let (table, now) = (store.table(), store.dialect.now());
    let sql = format!(
        "SELECT COUNT(*) AS n FROM {table} m WHERE m.status = 0 AND m.next_attempt_at <= {now} \
         AND NOT EXISTS (SELECT 1 FROM {table} e WHERE e.aggregate_type = m.aggregate_type \
         AND e.aggregate_id = m.aggregate_id AND e.sequence < m.sequence \
         AND (e.status = 2 OR (e.status = 0 AND e.next_attempt_at > {now})))"
    );
    let read = store_err("counting messages due");
    let statement = sea_orm::Statement::from_string(store.db.get_database_backend(), sql);
    match store.db.query_one_raw(statement).await.map_err(&read)? {
        Some(row) => count(&row, "n").map_err(read),
        None => Ok(0),
    }
}

/// A non-negative count column.
pub(super) fn count(row: &sea_orm::QueryResult, column: &str) -> Result<u64, sea_orm::DbErr> {
    Ok(u64::try_from(row.try_get::<i64>("", column)?).unwrap_or(0))
}
