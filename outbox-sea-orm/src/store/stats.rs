//! [`OutboxStats`]: counts for dashboards and alarms, in a few statements
//! of bounded work, whatever the table holds.

use std::collections::BTreeMap;

use sea_orm::{ConnectionTrait, QueryResult};
use txoutbox_core::StoreError;
use txoutbox_core::store::{EventStats, OutboxStats};
use uuid::Uuid;

use super::maintenance::count;
use super::{SeaOrmOutboxStore, store_err};
use crate::dialect::{Dialect, Sql};

/// Pending rows `stats` counts exactly, oldest first; past them the pending
/// count is an estimate.
pub const STATS_EXACT_PENDING: u64 = 10_000;

/// Pending, leased, delayed and dead counts, per event name, blocked
/// aggregates and the oldest waiting message's age, in five statements of
/// bounded work:
/// - the oldest [`STATS_EXACT_PENDING`] + 1 pending rows, by the pending
///   index, counted per event name (with those under a live lease and those
///   delayed); if there are more, `pending_is_estimate` is set and
///   `pending` is the larger of that count and PostgreSQL's estimate of the
///   pending index's rows (as of its last `VACUUM`/`ANALYZE`), on
///   MySQL/MariaDB and SQLite the count;
/// - dead rows per event name, by the partial index of dead rows (MySQL:
///   the `(status, …)` heads index): dead messages are few;
/// - the aggregates with a pending message after a dead one: from the dead
///   rows, one probe each of the index of unpublished rows;
/// - the oldest waiting message: the first pending row, in id order (ids
///   are UUIDv7, in creation order), that is due (or backing off after a
///   failed publish) and heads its aggregate (no earlier unpublished row: a
///   one-entry probe of the index of unpublished rows). Every message that
///   should be moving has its aggregate's head moving too, and the head is
///   older, so heads are enough; rows behind a dead, delayed or leased
///   message are skipped. It reads no further than the first counted rows.
pub(super) async fn stats(store: &SeaOrmOutboxStore) -> Result<OutboxStats, StoreError> {
    let mut stats = OutboxStats::default();
    let mut by_event: BTreeMap<String, EventStats> = BTreeMap::new();
    let last_counted = count_pending(store, &mut stats, &mut by_event).await?;
    count_dead(store, &mut stats, &mut by_event).await?;
    stats.blocked_aggregates = blocked_aggregates(store).await?;
    stats.oldest_pending_age = oldest_waiting_age(store, last_counted).await?;
    stats.by_event = by_event.into_values().collect();
    Ok(stats)
}

fn entry(by_event: &mut BTreeMap<String, EventStats>, name: String) -> &mut EventStats {
    by_event
        .entry(name.clone())
        .or_insert_with(|| EventStats::new(name, 0, 0))
}

async fn query(store: &SeaOrmOutboxStore, sql: String) -> Result<Vec<QueryResult>, StoreError> {
    let mut statement = Sql::new(store.dialect);
    statement.push(&sql);
    store
        .db
        .query_all_raw(statement.build())
        .await
        .map_err(store_err("reading stats"))
}

/// Counts the oldest [`STATS_EXACT_PENDING`] + 1 pending rows; returns the
/// last of them by id when there are more pending rows than that (the
/// bound of the search for the oldest waiting message).
async fn count_pending(
    store: &SeaOrmOutboxStore,
    stats: &mut OutboxStats,
    by_event: &mut BTreeMap<String, EventStats>,
) -> Result<Option<Uuid>, StoreError> {
    let dialect = store.dialect;
    let (table, now) = (store.table(), dialect.now());
    let read = store_err("reading stats");
    // PostgreSQL has no max() of uuid; the text form sorts alike.
    let last_id = match dialect {
        Dialect::Postgres => "MAX(p.id::text)",
        _ => "MAX(p.id)",
    };
    let pending = query(
        store,
        format!(
            "SELECT p.event_name, COUNT(*) AS n, \
             COUNT(CASE WHEN p.lease_expires_at > {now} THEN 1 END) AS leased, \
             COUNT(CASE WHEN p.attempts = 0 AND p.next_attempt_at > {now} THEN 1 END) AS not_due, \
             {last_id} AS last_id \
             FROM (SELECT id, event_name, lease_expires_at, attempts, next_attempt_at \
               FROM {table} WHERE status = 0 ORDER BY id LIMIT {limit}) p GROUP BY p.event_name",
            limit = STATS_EXACT_PENDING + 1
        ),
    )
    .await?;
    let mut last = None;
    for row in &pending {
        let n = count(row, "n").map_err(&read)?;
        entry(by_event, row.try_get("", "event_name").map_err(&read)?).pending += n;
        stats.pending += n;
        stats.leased += count(row, "leased").map_err(&read)?;
        stats.delayed += count(row, "not_due").map_err(&read)?;
        let id = match dialect {
            Dialect::Postgres => {
                let text: String = row.try_get("", "last_id").map_err(&read)?;
                Uuid::parse_str(&text).map_err(|err| StoreError::msg(err.to_string()))?
            }
            // The aggregate's value is plain bytes to the drivers.
            _ => {
                let bytes: Vec<u8> = row.try_get("", "last_id").map_err(&read)?;
                Uuid::from_slice(&bytes).map_err(|err| StoreError::msg(err.to_string()))?
            }
        };
        last = last.max(Some(id));
    }
    if stats.pending <= STATS_EXACT_PENDING {
        return Ok(None);
    }
    stats.pending_is_estimate = true;
    if dialect == Dialect::Postgres {
        let index = format!("{}_pending", store.config.table().as_str());
        let estimate = query(
            store,
            format!(
                "SELECT GREATEST(reltuples, 0)::bigint AS n FROM pg_class \
                 WHERE oid = to_regclass('{}')",
                dialect.quote(&index).replace('\'', "''")
            ),
        )
        .await?;
        if let Some(row) = estimate.first() {
            stats.pending = stats.pending.max(count(row, "n").map_err(&read)?);
        }
    }
    Ok(last)
}

async fn count_dead(
    store: &SeaOrmOutboxStore,
    stats: &mut OutboxStats,
    by_event: &mut BTreeMap<String, EventStats>,
) -> Result<(), StoreError> {
    let read = store_err("reading stats");
    let dead = query(
        store,
        format!(
            "SELECT event_name, COUNT(*) AS n FROM {} WHERE status = 2 GROUP BY event_name",
            store.table()
        ),
    )
    .await?;
    for row in &dead {
        let n = count(row, "n").map_err(&read)?;
        entry(by_event, row.try_get("", "event_name").map_err(&read)?).dead += n;
        stats.dead += n;
    }
    Ok(())
}

/// On PostgreSQL, keeps a probe a per-row subplan on its index: as a
/// (semi- or anti-) join the planner may hash over every pending row when
/// its statistics are stale.
fn probe_per_row(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Postgres => " OFFSET 0",
        _ => "",
    }
}

/// On SQLite, ` INDEXED BY` the table's index `<table>_<suffix>`: without
/// statistics its planner may take the aggregate index, which holds the
/// published rows too, or scan the table.
fn indexed_by(store: &SeaOrmOutboxStore, suffix: &str) -> String {
    match store.dialect {
        Dialect::Sqlite => format!(
            " INDEXED BY {}",
            store
                .dialect
                .quote(&format!("{}_{suffix}", store.config.table().as_str()))
        ),
        _ => String::new(),
    }
}

/// The hint that keeps the search for the oldest waiting message on the
/// pending index, in id order, stopping at the first match: SQLite's
/// `INDEXED BY`; MySQL/MariaDB's `FORCE INDEX` (bounded by an id, it may
/// otherwise read every counted row, probe each, then sort).
fn pending_index(store: &SeaOrmOutboxStore) -> String {
    match store.dialect {
        Dialect::MySql => format!(
            " FORCE INDEX ({})",
            store
                .dialect
                .quote(&format!("{}_pending", store.config.table().as_str()))
        ),
        _ => indexed_by(store, "pending"),
    }
}

/// Aggregates with a pending message after a dead one.
async fn blocked_aggregates(store: &SeaOrmOutboxStore) -> Result<u64, StoreError> {
    let table = store.table();
    // `status <> 1` as well: the partial index of unpublished rows.
    let rows = query(
        store,
        format!(
            "SELECT COUNT(*) AS n FROM (SELECT DISTINCT d.aggregate_type, d.aggregate_id \
             FROM {table} d{dead} WHERE d.status = 2 AND EXISTS (SELECT 1 FROM {table} w{unpublished} \
               WHERE w.status <> 1 AND w.status = 0 AND w.aggregate_type = d.aggregate_type \
               AND w.aggregate_id = d.aggregate_id AND w.sequence > d.sequence{probe})) b",
            dead = indexed_by(store, "dead"),
            unpublished = indexed_by(store, "unpublished"),
            probe = probe_per_row(store.dialect)
        ),
    )
    .await?;
    match rows.first() {
        Some(row) => count(row, "n").map_err(store_err("reading stats")),
        None => Ok(0),
    }
}

/// How long the oldest waiting message has waited (see [`stats`]), looking
/// no further than `last_counted` when set.
async fn oldest_waiting_age(
    store: &SeaOrmOutboxStore,
    last_counted: Option<Uuid>,
) -> Result<Option<std::time::Duration>, StoreError> {
    let dialect = store.dialect;
    let (table, now) = (store.table(), dialect.now());
    let mut sql = Sql::new(dialect);
    let bound = match last_counted {
        Some(id) => format!(" AND m.id <= {}", sql.param(id)),
        None => String::new(),
    };
    let earlier = |status: &str| {
        format!(
            "NOT EXISTS (SELECT 1 FROM {table} e{unpublished} WHERE {status} \
             AND e.aggregate_type = m.aggregate_type AND e.aggregate_id = m.aggregate_id \
             AND e.sequence < m.sequence{probe})",
            unpublished = indexed_by(store, "unpublished"),
            probe = probe_per_row(dialect)
        )
    };
    let (heads, order) = match dialect {
        // The `(status, aggregate_type, aggregate_id, sequence)` index: the
        // aggregate's lowest pending sequence is its first entry (a
        // `NOT EXISTS` over `sequence <` would read every pending row of a
        // head's aggregate: MySQL/MariaDB probe it by the prefix only), and
        // its dead rows (few); then the `(status, id)` index.
        Dialect::MySql => (
            format!(
                "m.sequence = (SELECT e.sequence FROM {table} e WHERE e.status = 0 \
                 AND e.aggregate_type = m.aggregate_type AND e.aggregate_id = m.aggregate_id \
                 ORDER BY e.sequence LIMIT 1) AND {}",
                earlier("e.status = 2")
            ),
            "m.status, m.id",
        ),
        // The partial indexes of unpublished and of pending rows.
        _ => (earlier("e.status <> 1"), "m.id"),
    };
    sql.push(&format!(
        "SELECT m.created_at, m.next_attempt_at, m.attempts, {now} AS db_now \
         FROM {table} m{pending} WHERE m.status = 0{bound} AND (m.next_attempt_at <= {now} OR m.attempts > 0) \
         AND {heads} ORDER BY {order} LIMIT 1",
        pending = pending_index(store)
    ));
    let read = store_err("reading the oldest waiting message");
    let rows = store.db.query_all_raw(sql.build()).await.map_err(&read)?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let created = dialect.time(row, "created_at").map_err(&read)?;
    let due = dialect.time(row, "next_attempt_at").map_err(&read)?;
    let attempts: i32 = row.try_get("", "attempts").map_err(&read)?;
    let db_now = dialect.time(row, "db_now").map_err(&read)?;
    // Waiting since it became due (recorded, its delay ended, requeued);
    // backing off after a failed publish: since it was recorded.
    let since = if attempts == 0 {
        created.max(due)
    } else {
        created
    };
    Ok(Some((db_now - since).to_std().unwrap_or_default()))
}
