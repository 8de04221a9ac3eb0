//! Claiming a batch under a lease, in per-aggregate order, at a cost bounded
//! by the work: never by an aggregate's published history, never by the
//! pending rows blocked behind a leased, backing-off or dead message.
//!
//! An ordinary claim *walks the aggregates*: it visits, in key order, each
//! aggregate that has an unpublished message, looking only at that
//! aggregate's *head* (its lowest unpublished sequence) through the index of
//! unpublished rows, and stops once it found `limit` heads that are
//! publishable now. From each such head it takes the run of consecutive
//! publishable messages, up to `limit` messages in all, locks them, and
//! keeps a message only if every earlier message of the run is locked by
//! this claim too. A blocked aggregate costs one index probe, whatever waits
//! behind its head; a published history costs nothing (the probe never sees
//! published rows).
//!
//! The walk resumes where the previous claim stopped (the store's
//! [`WalkCursor`]) and wraps around at the end, so every aggregate is
//! visited in turn under a backlog that never drains: claims are fair
//! between aggregates, not first-in-first-out between messages. Only a walk
//! that reached the last aggregate starts the next one from the first: a
//! claim that stopped at its limit resumes after its last aggregate even
//! when it came back a few messages short (a run cut where another
//! transaction held a row). Restarting after every short batch starved the
//! last aggregates: on MariaDB behind 16 writers, claims of 1,000 heads
//! came back with 976-999 messages, every walk began at the first
//! aggregate, and the last third of the key space waited up to 100 s.
//!
//! | backend | walk | lock |
//! |---|---|---|
//! | PostgreSQL | recursive CTE, one index probe per aggregate ([`postgres`]) | in the same statement, `FOR UPDATE SKIP LOCKED` |
//! | MySQL/MariaDB | loose index scan over `(status, aggregate_type, aggregate_id, sequence)` ([`mysql`]) | heads `SKIP LOCKED`, then their runs, one transaction at `READ COMMITTED` |
//! | SQLite | recursive CTE, one index probe per aggregate ([`sqlite`]) | one statement under the single writer |
//!
//! The claim by ids (the processor's fast path, for messages it was told
//! were just committed) looks only at the named rows, their aggregates'
//! heads and the rows between.

mod by_ids;
mod mysql;
mod postgres;
mod sqlite;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::QueryResult;
use txoutbox_core::store::{ClaimedBatch, ClaimedMessage, Failure, FailureKind, Lease, LeaseToken};
use txoutbox_core::{MessageId, RetryPolicy, StoreError};

use super::{SeaOrmOutboxStore, store_err};
use crate::dialect::Dialect;
use crate::row::read_message;
use crate::sync::locked;

/// An aggregate, as the walk orders them: by type, then id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct AggregateKey {
    pub(crate) aggregate_type: String,
    pub(crate) aggregate_id: String,
}

impl AggregateKey {
    /// The key in a row's `aggregate_type` and `aggregate_id` columns.
    fn read(row: &QueryResult) -> Result<Self, sea_orm::DbErr> {
        Ok(Self {
            aggregate_type: row.try_get("", "aggregate_type")?,
            aggregate_id: row.try_get("", "aggregate_id")?,
        })
    }
}

/// Where the next walk over the aggregates starts: after the last aggregate
/// a claim took messages from, unless that claim's walk reached the last
/// aggregate. Shared by the clones of one store; it only decides fairness,
/// never correctness.
#[derive(Debug, Clone, Default)]
pub(crate) struct WalkCursor(Arc<Mutex<Option<AggregateKey>>>);

impl WalkCursor {
    fn take(&self) -> Option<AggregateKey> {
        locked(&self.0).take()
    }

    fn set(&self, key: Option<AggregateKey>) {
        *locked(&self.0) = key;
    }
}

/// What one walk leased.
#[derive(Default)]
struct Walked {
    /// The leased rows, selected with [`crate::row::message_columns`].
    rows: Vec<QueryResult>,
    /// When their lease runs out, by the database clock.
    expires_at: Option<DateTime<Utc>>,
    /// The last aggregate, in walk order, that messages were taken from.
    last: Option<AggregateKey>,
    /// The walk went past the last aggregate with a pending message and
    /// the limit cut no run: it left nothing publishable behind it (so it
    /// leased fewer rows than its limit).
    ended: bool,
}

/// Leases up to `limit` publishable messages, walking the aggregates from
/// where the last claim stopped, and from the start when that reaches the
/// end with too few.
pub(super) async fn claim(
    store: &SeaOrmOutboxStore,
    limit: u32,
    lease: Duration,
) -> Result<ClaimedBatch, StoreError> {
    let token = LeaseToken::new();
    let limit = limit.max(1) as usize;
    let start = store.cursor.take();
    let resumed = start.is_some();
    let mut walked = walk(store, token, limit, lease, start).await?;
    if resumed && walked.ended {
        // The end of the aggregates came first: wrap around. What the first
        // walk leased is skipped now (its heads are leased).
        let rest = walk(store, token, limit - walked.rows.len(), lease, None).await?;
        walked.rows.extend(rest.rows);
        walked.expires_at = match (walked.expires_at, rest.expires_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        walked.last = rest.last.or(walked.last);
        walked.ended = rest.ended;
    }
    // Nothing left behind after the start: the next walk starts from the
    // first aggregate. An empty claim that did not end found only heads
    // other claimers hold: nothing to hurry for.
    let more = !walked.ended && !walked.rows.is_empty();
    store.cursor.set(if walked.ended {
        None
    } else {
        walked.last.take()
    });
    batch(store, token, walked.rows, walked.expires_at, more).await
}

/// Leases the named messages that are publishable now (see
/// [`OutboxStore::claim_ids`](txoutbox_core::OutboxStore::claim_ids)).
pub(super) async fn claim_ids(
    store: &SeaOrmOutboxStore,
    ids: &[MessageId],
    lease: Duration,
) -> Result<ClaimedBatch, StoreError> {
    let token = LeaseToken::new();
    if ids.is_empty() {
        return batch(store, token, Vec::new(), None, false).await;
    }
    let (rows, expires_at) = match store.dialect {
        Dialect::Postgres | Dialect::Sqlite => by_ids::claim(store, token, ids, lease).await?,
        Dialect::MySql => mysql::claim_ids(store, token, ids, lease).await?,
    };
    batch(store, token, rows, expires_at, false).await
}

/// One walk of `limit` messages from `after` (or the first aggregate).
async fn walk(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    limit: usize,
    lease: Duration,
    after: Option<AggregateKey>,
) -> Result<Walked, StoreError> {
    match store.dialect {
        Dialect::Postgres => postgres::walk(store, token, limit, lease, after.as_ref()).await,
        Dialect::MySql => mysql::walk(store, token, limit, lease, after.as_ref()).await,
        Dialect::Sqlite => sqlite::walk(store, token, limit, lease, after.as_ref()).await,
    }
}

/// The plan of an ordinary claim of `limit` (PostgreSQL: `EXPLAIN (ANALYZE,
/// BUFFERS, FORMAT JSON)`, run and rolled back; SQLite: `EXPLAIN QUERY
/// PLAN`); MySQL/MariaDB claim in several statements and have none.
pub(super) async fn explain(store: &SeaOrmOutboxStore, limit: u32) -> Result<String, StoreError> {
    let limit = limit.max(1) as usize;
    match store.dialect {
        Dialect::Postgres => postgres::explain(store, limit).await,
        Dialect::Sqlite => sqlite::explain(store, limit).await,
        Dialect::MySql => Err(StoreError::msg(
            "MySQL/MariaDB claims run several statements: count rows read (Handler_read_*) instead",
        )),
    }
}

/// The claimed batch from its leased rows, in publishing order. A row that
/// cannot be read back as a message (written by another program, a schema
/// drift, a newer version of this library) goes dead at once with the
/// reason, under the claim's own lease, and the later messages of its
/// aggregate in the batch are released (they wait behind it, as behind any
/// dead message); the rest of the batch is handed out. `more`: the claim
/// stopped at its limit ([`ClaimedBatch::more`]).
async fn batch(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    rows: Vec<QueryResult>,
    expires_at: Option<DateTime<Utc>>,
    more: bool,
) -> Result<ClaimedBatch, StoreError> {
    let mut messages = Vec::with_capacity(rows.len());
    let mut unreadable = Vec::new();
    // Where each unreadable row sits: later messages there must wait.
    let mut blocked: Vec<(AggregateKey, u64)> = Vec::new();
    let mut block_all = false;
    for row in &rows {
        match read_message(store.dialect, row) {
            Ok(claimed) => messages.push(claimed),
            Err(err) => {
                let id: uuid::Uuid = row
                    .try_get("", "id")
                    .map_err(store_err("reading a claimed row's id"))?;
                tracing::error!(message_id = %id, error = %txoutbox_core::ErrorChain(&err), "outbox row cannot be read as a message; it is dead");
                unreadable.push(Failure {
                    id: MessageId::from_uuid(id),
                    error: format!(
                        "the outbox row cannot be read as a message: {}",
                        txoutbox_core::ErrorChain(&err)
                    ),
                    kind: FailureKind::Permanent,
                });
                match position(row) {
                    Ok(at) => blocked.push(at),
                    Err(_) => block_all = true,
                }
            }
        }
    }
    if !unreadable.is_empty() {
        let (held, kept): (Vec<ClaimedMessage>, Vec<ClaimedMessage>) =
            messages.into_iter().partition(|claimed| {
                let m = &claimed.message;
                block_all
                    || blocked.iter().any(|(key, sequence)| {
                        key.aggregate_type == m.aggregate_type
                            && key.aggregate_id == m.aggregate_id
                            && m.sequence > *sequence
                    })
            });
        messages = kept;
        super::settle::fail(store, token, &unreadable, &RetryPolicy::default()).await?;
        let held: Vec<MessageId> = held.iter().map(|c| c.message.id).collect();
        if !held.is_empty() {
            super::settle::release(store, token, &held).await?;
        }
    }
    ClaimedMessage::sort_for_publishing(&mut messages);
    tracing::trace!(claimed = messages.len(), more, %token, "outbox claim");
    Ok(ClaimedBatch {
        lease: Lease {
            token,
            expires_at: expires_at.unwrap_or_else(Utc::now),
        },
        messages,
        more,
    })
}

/// A row's aggregate and sequence, read on their own.
fn position(row: &QueryResult) -> Result<(AggregateKey, u64), sea_orm::DbErr> {
    let sequence: i64 = row.try_get("", "sequence")?;
    Ok((
        AggregateKey::read(row)?,
        u64::try_from(sequence).unwrap_or(0),
    ))
}

/// `<alias>` is publishable now: pending, due, and not leased.
fn publishable(dialect: Dialect, alias: &str) -> String {
    let now = dialect.now();
    format!(
        "({alias}.status = 0 AND {alias}.next_attempt_at <= {now} \
         AND ({alias}.lease_expires_at IS NULL OR {alias}.lease_expires_at <= {now}))"
    )
}

/// The lease's expiry of the first row, if any.
fn first_lease(
    dialect: Dialect,
    rows: &[QueryResult],
    column: &str,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    match rows.first() {
        Some(row) => dialect
            .time_opt(row, column)
            .map_err(store_err("reading the lease")),
        None => Ok(None),
    }
}
