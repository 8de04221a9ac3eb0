//! What `outbox status` shows beyond [`OutboxStats`]: skipped messages,
//! counts per aggregate type, and the aggregates held behind a dead or
//! backing-off head with how much waits behind each. Bounded work like
//! `stats`: pending rows are read through the pending index up to
//! [`STATS_EXACT_PENDING`] + 1, dead and skipped rows through their own
//! indexes.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sea_orm::ConnectionTrait;
use txoutbox_core::store::OutboxStats;
use txoutbox_core::{MessageId, StoreError};

use super::maintenance::count;
use super::stats::{STATS_EXACT_PENDING, stats};
use super::{SeaOrmOutboxStore, store_err};
use crate::dialect::Sql;

/// The outbox at a glance, for an operator.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Overview {
    /// Pending, leased and dead counts, per event name, the oldest pending
    /// age (what [`OutboxStore::stats`](txoutbox_core::OutboxStore::stats)
    /// returns).
    pub stats: OutboxStats,
    /// Dead messages an operator skipped, not yet purged.
    pub skipped: u64,
    /// Pending and dead counts per aggregate type, sorted by type (pending
    /// counts cover the oldest pending messages only when
    /// `stats.pending_is_estimate`).
    pub by_aggregate_type: Vec<AggregateTypeStats>,
    /// Aggregates held behind a dead head or a head backing off after a
    /// failed publish, oldest head first (backing-off heads are looked for
    /// among the oldest [`STATS_EXACT_PENDING`] + 1 pending messages).
    pub blocked: Vec<BlockedAggregate>,
}

/// Counts of one aggregate type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AggregateTypeStats {
    /// The aggregate type.
    pub aggregate_type: String,
    /// Pending messages.
    pub pending: u64,
    /// Dead messages.
    pub dead: u64,
}

/// An aggregate whose head cannot be published now, and what waits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockedAggregate {
    /// The aggregate's type.
    pub aggregate_type: String,
    /// The aggregate's id.
    pub aggregate_id: String,
    /// Its head: the message everything else waits behind.
    pub head: MessageId,
    /// The head's event name.
    pub event_name: String,
    /// The head's sequence.
    pub sequence: u64,
    /// `None` when the head is dead; else when its backoff ends.
    pub retry_at: Option<DateTime<Utc>>,
    /// The head's failed attempts.
    pub attempts: u32,
    /// The head's last error.
    pub last_error: Option<String>,
    /// Later unsettled messages of the aggregate: they wait behind the head.
    pub waiting: u64,
}

/// The overview, with at most `blocked_limit` blocked aggregates.
pub(super) async fn overview(
    store: &SeaOrmOutboxStore,
    blocked_limit: u32,
) -> Result<Overview, StoreError> {
    let stats = stats(store).await?;
    let skipped = skipped_count(store).await?;
    let by_aggregate_type = by_aggregate_type(store).await?;
    let mut blocked = blocked_heads(store, Head::Dead, blocked_limit).await?;
    blocked.extend(blocked_heads(store, Head::BackingOff, blocked_limit).await?);
    blocked.sort_by_key(|b| b.head);
    blocked.truncate(blocked_limit as usize);
    Ok(Overview {
        stats,
        skipped,
        by_aggregate_type,
        blocked,
    })
}

async fn skipped_count(store: &SeaOrmOutboxStore) -> Result<u64, StoreError> {
    let read = store_err("counting skipped messages");
    let mut sql = Sql::new(store.dialect);
    sql.push(&format!(
        "SELECT COUNT(*) AS n FROM {} WHERE skipped_at IS NOT NULL",
        store.table()
    ));
    match store.db.query_one_raw(sql.build()).await.map_err(&read)? {
        Some(row) => count(&row, "n").map_err(read),
        None => Ok(0),
    }
}

async fn by_aggregate_type(
    store: &SeaOrmOutboxStore,
) -> Result<Vec<AggregateTypeStats>, StoreError> {
    let read = store_err("counting per aggregate type");
    let table = store.table();
    let mut counts: BTreeMap<String, AggregateTypeStats> = BTreeMap::new();
    for (dead, statement) in [
        (
            false,
            format!(
                "SELECT p.aggregate_type, COUNT(*) AS n FROM (SELECT aggregate_type FROM {table} \
                 WHERE status = 0 ORDER BY id LIMIT {limit}) p GROUP BY p.aggregate_type",
                limit = STATS_EXACT_PENDING + 1
            ),
        ),
        (
            true,
            format!(
                "SELECT aggregate_type, COUNT(*) AS n FROM {table} WHERE status = 2 \
                 GROUP BY aggregate_type"
            ),
        ),
    ] {
        let mut sql = Sql::new(store.dialect);
        sql.push(&statement);
        for row in store.db.query_all_raw(sql.build()).await.map_err(&read)? {
            let name: String = row.try_get("", "aggregate_type").map_err(&read)?;
            let n = count(&row, "n").map_err(&read)?;
            let entry = counts
                .entry(name.clone())
                .or_insert_with(|| AggregateTypeStats {
                    aggregate_type: name,
                    ..AggregateTypeStats::default()
                });
            if dead {
                entry.dead += n;
            } else {
                entry.pending += n;
            }
        }
    }
    Ok(counts.into_values().collect())
}

/// Which heads to look for.
#[derive(Clone, Copy)]
enum Head {
    Dead,
    BackingOff,
}

/// Heads of the given kind (rows with no unsettled earlier message of their
/// aggregate), with how many unsettled messages wait behind each.
async fn blocked_heads(
    store: &SeaOrmOutboxStore,
    kind: Head,
    limit: u32,
) -> Result<Vec<BlockedAggregate>, StoreError> {
    let dialect = store.dialect;
    let table = store.table();
    let now = dialect.now();
    let candidates = match kind {
        Head::Dead => format!("SELECT id FROM {table} WHERE status = 2"),
        // Wrapped twice: MySQL/MariaDB take no LIMIT in an IN subquery.
        Head::BackingOff => format!(
            "SELECT p.id FROM (SELECT id, attempts, next_attempt_at FROM {table} \
             WHERE status = 0 ORDER BY id LIMIT {exact}) p \
             WHERE p.attempts > 0 AND p.next_attempt_at > {now}",
            exact = STATS_EXACT_PENDING + 1
        ),
    };
    let mut sql = Sql::new(dialect);
    let limit = sql.param(i64::from(limit));
    sql.push(&format!(
        "SELECT b.id, b.event_name, b.aggregate_type, b.aggregate_id, b.sequence, \
         b.attempts, b.last_error, b.next_attempt_at, \
         (SELECT COUNT(*) FROM {table} w WHERE w.aggregate_type = b.aggregate_type \
           AND w.aggregate_id = b.aggregate_id AND w.status <> 1 AND w.sequence > b.sequence) \
         AS waiting \
         FROM {table} b WHERE b.id IN (SELECT c.id FROM ({candidates}) c) \
         AND NOT EXISTS (SELECT 1 FROM {table} e WHERE e.aggregate_type = b.aggregate_type \
           AND e.aggregate_id = b.aggregate_id AND e.status <> 1 AND e.sequence < b.sequence) \
         ORDER BY b.id LIMIT {limit}"
    ));
    store
        .read_rows(sql.build(), "finding blocked aggregates", |row| {
            let sequence: i64 = row.try_get("", "sequence")?;
            let attempts: i32 = row.try_get("", "attempts")?;
            Ok(BlockedAggregate {
                aggregate_type: row.try_get("", "aggregate_type")?,
                aggregate_id: row.try_get("", "aggregate_id")?,
                head: MessageId::from_uuid(row.try_get("", "id")?),
                event_name: row.try_get("", "event_name")?,
                sequence: u64::try_from(sequence).unwrap_or(0),
                retry_at: match kind {
                    Head::Dead => None,
                    Head::BackingOff => Some(dialect.time(row, "next_attempt_at")?),
                },
                attempts: u32::try_from(attempts).unwrap_or(0),
                last_error: row.try_get("", "last_error")?,
                waiting: count(row, "waiting")?,
            })
        })
        .await
}
