//! Operations: requeue dead messages, purge old published ones, stats.

use std::collections::BTreeMap;
use std::time::Duration;

use outbox_core::{DeadSelector, EventStats, OutboxStats, StoreError};
use sea_orm::ConnectionTrait;

use super::{SeaOrmOutboxStore, millis, store_err};
use crate::dialect::{Dialect, Sql};

/// Dead back to pending, attempts reset, due now.
pub(super) async fn requeue_dead(
    store: &SeaOrmOutboxStore,
    selector: DeadSelector,
) -> Result<u64, StoreError> {
    let dialect = store.dialect;
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "UPDATE {} SET status = 0, attempts = 0, next_attempt_at = {}, lease_token = NULL, \
         lease_expires_at = NULL WHERE status = 2",
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
    }
    let result = store
        .db
        .execute_raw(sql.build())
        .await
        .map_err(store_err("requeueing"))?;
    Ok(result.rows_affected())
}

/// Deletes published rows older than `older_than`, `batch_size` at a time so
/// no statement holds many locks or runs long.
pub(super) async fn purge_published(
    store: &SeaOrmOutboxStore,
    older_than: Duration,
    batch_size: u32,
) -> Result<u64, StoreError> {
    let dialect = store.dialect;
    let table = store.table();
    let batch = i64::from(batch_size.max(1));
    let mut purged = 0;
    loop {
        let mut sql = Sql::new(dialect);
        let cutoff = {
            let ago = sql.param(-millis(older_than));
            dialect.now_plus_millis(&ago)
        };
        let limit = sql.param(batch);
        let filter = format!("status = 1 AND published_at < {cutoff}");
        sql.push(&match dialect {
            Dialect::MySql => format!("DELETE FROM {table} WHERE {filter} ORDER BY published_at LIMIT {limit}"),
            _ => format!(
                "DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE {filter} LIMIT {limit})"
            ),
        });
        let deleted = store
            .db
            .execute_raw(sql.build())
            .await
            .map_err(store_err("purging"))?
            .rows_affected();
        purged += deleted;
        if deleted < batch as u64 {
            return Ok(purged);
        }
    }
}

/// Pending, leased and dead counts, per event name, and the oldest pending age.
pub(super) async fn stats(store: &SeaOrmOutboxStore) -> Result<OutboxStats, StoreError> {
    let dialect = store.dialect;
    let now = dialect.now();
    let sql = format!(
        "SELECT event_name, status, COUNT(*) AS n, \
         COUNT(CASE WHEN lease_expires_at > {now} THEN 1 END) AS leased, \
         MIN(created_at) AS oldest, {now} AS db_now \
         FROM {} WHERE status IN (0, 2) GROUP BY event_name, status",
        store.table()
    );
    let mut statement = Sql::new(dialect);
    statement.push(&sql);
    let rows = store
        .db
        .query_all_raw(statement.build())
        .await
        .map_err(store_err("reading stats"))?;
    let mut stats = OutboxStats::default();
    let mut by_event: BTreeMap<String, EventStats> = BTreeMap::new();
    let read = store_err("reading stats");
    for row in &rows {
        let name: String = row.try_get("", "event_name").map_err(&read)?;
        let status: i16 = row.try_get("", "status").map_err(&read)?;
        let count = u64::try_from(row.try_get::<i64>("", "n").map_err(&read)?).unwrap_or(0);
        let entry = by_event.entry(name.clone()).or_insert_with(|| EventStats {
            event_name: name,
            ..EventStats::default()
        });
        if status == 0 {
            entry.pending += count;
            stats.pending += count;
            stats.leased +=
                u64::try_from(row.try_get::<i64>("", "leased").map_err(&read)?).unwrap_or(0);
            let oldest = dialect.time_opt(row, "oldest").map_err(&read)?;
            let db_now = dialect.time(row, "db_now").map_err(&read)?;
            if let Some(oldest) = oldest {
                let age = (db_now - oldest).to_std().unwrap_or_default();
                stats.oldest_pending_age =
                    Some(stats.oldest_pending_age.map_or(age, |a| a.max(age)));
            }
        } else {
            entry.dead += count;
            stats.dead += count;
        }
    }
    stats.by_event = by_event.into_values().collect();
    Ok(stats)
}
