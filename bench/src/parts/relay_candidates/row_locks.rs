//! Row locks as leases: in one transaction, select the next publishable
//! rows `FOR UPDATE SKIP LOCKED`, publish them pipelined, mark them
//! published (or delete them), commit. One write per event; a relay that
//! dies mid-batch frees its rows the moment its connection drops.
//!
//! The selection is the store's PostgreSQL claim (`outbox-sea-orm`,
//! `store/claim/postgres.rs`) with its final `UPDATE … RETURNING` made a
//! `SELECT`: walk the aggregates after a cursor through their heads (lowest
//! unpublished sequence), take each publishable head's run in sequence
//! order, lock what can be locked, and keep a message only if every earlier
//! chosen message of its aggregate is locked here too. A second relay
//! therefore skips an aggregate whose head the first holds, and per-aggregate
//! order holds with any number of relays. "Publishable" is the claim's test
//! without the lease (`status = 0`, retry time reached): the lock is the
//! lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::future::join_all;
use sea_orm::sqlx::{self, Connection, PgConnection, Row, postgres::PgRow};
use txoutbox_core::{OutboxMessage, Publisher};
use txoutbox_nats::JetStreamPublisher;

use super::row;
use crate::harness::error::BoxError;

/// Rows per batch (the processor's default batch size).
pub(super) const BATCH: usize = 1_000;

/// What a relay does with a published row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settle {
    /// `UPDATE … SET status = 1` (the row stays, as `KeepPublished`).
    Mark,
    /// `DELETE` (as `Retention::Delete`).
    Delete,
}

/// What the relays of one drain did.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) published: AtomicU64,
    /// Acks the broker answered as already stored (a re-publish).
    pub(super) duplicates: AtomicU64,
    pub(super) batches: AtomicU64,
    /// Batches that came back empty (nothing free, or all held elsewhere).
    pub(super) empty: AtomicU64,
}

/// One relay with its own connection.
pub(super) struct Relay {
    conn: PgConnection,
    /// The last aggregate of the previous batch: the walk goes on after it.
    after: Option<(String, String)>,
    settle: Settle,
}

impl Relay {
    /// Connects to `url` with `schema` as its search path.
    pub(super) async fn connect(url: &str, schema: &str, settle: Settle) -> Result<Self, BoxError> {
        let mut conn = PgConnection::connect(url).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET search_path TO {schema}")))
            .execute(&mut conn)
            .await?;
        Ok(Self {
            conn,
            after: None,
            settle,
        })
    }

    /// Opens a transaction and locks the next batch; the transaction stays
    /// open (call [`finish`](Self::finish) or drop the relay).
    pub(super) async fn lock_batch(&mut self) -> Result<Vec<OutboxMessage>, BoxError> {
        let sql = format!(
            "BEGIN; SET LOCAL jit = off; SET LOCAL enable_seqscan = off; \
             SET LOCAL synchronous_commit = off; {}",
            statement(BATCH, self.after.as_ref())
        );
        let rows: Vec<PgRow> = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .fetch_all(&mut self.conn)
            .await?;
        let mut messages = Vec::with_capacity(rows.len());
        for r in &rows {
            // The cursor's row alone when nothing was kept.
            if r.try_get::<Option<&str>, _>("id")?.is_none() {
                continue;
            }
            messages.push(row::message(|c| {
                r.try_get::<Option<&str>, _>(c).ok().flatten()
            })?);
        }
        // After the last aggregate kept; with none kept (every head held by
        // another relay, or not publishable), after the last one walked, so
        // the next batch looks past them instead of walking them again.
        self.after = match rows.first() {
            Some(r) => Some((r.try_get("walk_last_type")?, r.try_get("walk_last_id")?)),
            None => None,
        };
        Ok(messages)
    }

    /// Settles `published` (with their stream sequences) and commits.
    pub(super) async fn finish(&mut self, published: &[(String, i64)]) -> Result<(), BoxError> {
        if published.is_empty() {
            sqlx::raw_sql("COMMIT").execute(&mut self.conn).await?;
            return Ok(());
        }
        let ids: Vec<&str> = published.iter().map(|(id, _)| id.as_str()).collect();
        let ids = format!("'{{{}}}'::uuid[]", ids.join(","));
        let sql = match self.settle {
            Settle::Mark => {
                let sequences: Vec<String> = published.iter().map(|(_, s)| s.to_string()).collect();
                format!(
                    "UPDATE outbox_messages AS m SET status = 1, published_at = now(), \
                     stream_sequence = p.stream_sequence \
                     FROM unnest({ids}, '{{{}}}'::bigint[]) AS p(id, stream_sequence) \
                     WHERE m.id = p.id; COMMIT",
                    sequences.join(",")
                )
            }
            Settle::Delete => format!("DELETE FROM outbox_messages WHERE id = ANY ({ids}); COMMIT"),
        };
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut self.conn)
            .await?;
        Ok(())
    }

    /// Closes the connection cleanly.
    pub(super) async fn close(self) -> Result<(), BoxError> {
        self.conn.close().await?;
        Ok(())
    }
}

/// Publishes `messages` pipelined (every publish sent in order before any
/// ack is awaited, like the naive loop); returns (id, stream sequence) of
/// each and how many the broker had already.
pub(super) async fn publish(
    publisher: &JetStreamPublisher,
    messages: &[OutboxMessage],
) -> Result<(Vec<(String, i64)>, u64), BoxError> {
    let acks = join_all(messages.iter().map(|m| publisher.publish(m))).await;
    let mut done = Vec::with_capacity(acks.len());
    let mut duplicates = 0;
    for (message, ack) in messages.iter().zip(acks) {
        let ack = ack?;
        duplicates += u64::from(ack.duplicate);
        done.push((
            message.id.to_string(),
            ack.stream_sequence.map_or(-1, |s| s as i64),
        ));
    }
    Ok((done, duplicates))
}

/// One relay's loop until `counts.published` reaches `expected`.
pub(super) async fn drain(
    mut relay: Relay,
    publisher: JetStreamPublisher,
    counts: Arc<Counts>,
    expected: u64,
) -> Result<(), BoxError> {
    let started = Instant::now();
    while counts.published.load(Ordering::Relaxed) < expected {
        if started.elapsed() > Duration::from_secs(900) {
            return Err("a row-lock relay ran 15 minutes".into());
        }
        let had_cursor = relay.after.is_some();
        let messages = relay.lock_batch().await?;
        counts.batches.fetch_add(1, Ordering::Relaxed);
        if messages.is_empty() {
            relay.finish(&[]).await?;
            counts.empty.fetch_add(1, Ordering::Relaxed);
            if !had_cursor {
                // Nothing free from the start: the rest is held by the other
                // relay (or blocked); look again shortly.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            continue;
        }
        let (done, duplicates) = publish(&publisher, &messages).await?;
        relay.finish(&done).await?;
        counts
            .published
            .fetch_add(done.len() as u64, Ordering::Relaxed);
        counts.duplicates.fetch_add(duplicates, Ordering::Relaxed);
    }
    relay.close().await
}

/// The claim's walk with the lock as the lease; values in the text.
fn statement(limit: usize, after: Option<&(String, String)>) -> String {
    let free = |a: &str| format!("({a}.status = 0 AND {a}.next_attempt_at <= now())");
    let head = |a: &str| {
        format!(
            "{a}.aggregate_type::text AS aggregate_type, {a}.aggregate_id::text AS aggregate_id, \
             {a}.sequence, {} AS free",
            free(a)
        )
    };
    let mut first = String::from("h.status <> 1");
    if let Some((t, i)) = after {
        first.push_str(&format!(
            " AND (h.aggregate_type, h.aggregate_id) > ({}, {})",
            literal(t),
            literal(i)
        ));
    }
    let order = "ORDER BY h.aggregate_type, h.aggregate_id, h.sequence LIMIT 1";
    format!(
        "WITH RECURSIVE walk AS ( \
           SELECT 1::bigint AS step, f.*, f.free::int::bigint AS found FROM ( \
             SELECT {head_h} FROM outbox_messages h WHERE {first} {order}) f \
           UNION ALL \
           SELECT w.step + 1, n.*, w.found + n.free::int FROM walk w CROSS JOIN LATERAL ( \
             SELECT {head_h} FROM outbox_messages h WHERE h.status <> 1 \
             AND (h.aggregate_type, h.aggregate_id) > (w.aggregate_type, w.aggregate_id) {order}) n \
           WHERE w.found < {limit} \
         ), chosen AS MATERIALIZED ( \
           SELECT r.id, w.aggregate_type, w.aggregate_id, r.sequence, r.free, w.step \
           FROM walk w CROSS JOIN LATERAL ( \
             SELECT e.id, e.sequence, {free_e} AS free FROM outbox_messages e \
             WHERE e.aggregate_type = w.aggregate_type AND e.aggregate_id = w.aggregate_id \
             AND e.status <> 1 AND e.sequence >= w.sequence ORDER BY e.sequence LIMIT {limit}) r \
           WHERE w.free LIMIT {limit} \
         ), locked AS MATERIALIZED ( \
           SELECT m.id, m.aggregate_type::text AS aggregate_type, m.aggregate_id::text AS aggregate_id, \
             m.sequence FROM outbox_messages m \
           WHERE m.id = ANY (ARRAY(SELECT c.id FROM chosen c WHERE c.free)) AND {free_m} \
           FOR UPDATE OF m SKIP LOCKED \
         ), kept AS MATERIALIZED ( \
           SELECT u.id, u.aggregate_type, u.aggregate_id, u.step FROM ( \
             SELECT x.id, x.aggregate_type, x.aggregate_id, x.is_locked, \
               max(x.step) OVER (PARTITION BY x.aggregate_type, x.aggregate_id) AS step, \
               count(*) FILTER (WHERE NOT x.is_locked) OVER upto AS chosen_upto, \
               count(*) FILTER (WHERE x.is_locked) OVER upto AS locked_upto \
             FROM (SELECT c.id, c.aggregate_type, c.aggregate_id, c.sequence, false AS is_locked, c.step \
                   FROM chosen c \
                   UNION ALL SELECT l.id, l.aggregate_type, l.aggregate_id, l.sequence, true, NULL \
                   FROM locked l) x \
             WINDOW upto AS (PARTITION BY x.aggregate_type, x.aggregate_id \
               ORDER BY x.sequence, x.is_locked ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) \
           ) u WHERE u.is_locked AND u.chosen_upto = u.locked_upto \
         ), last AS ( \
           (SELECT k.aggregate_type, k.aggregate_id, 0 AS pick FROM kept k ORDER BY k.step DESC LIMIT 1) \
           UNION ALL \
           (SELECT w.aggregate_type, w.aggregate_id, 1 FROM walk w ORDER BY w.step DESC LIMIT 1) \
         ), cursor AS ( \
           SELECT l.aggregate_type AS walk_last_type, l.aggregate_id AS walk_last_id \
           FROM last l ORDER BY l.pick LIMIT 1 \
         ) \
         SELECT {columns}, c.walk_last_type, c.walk_last_id \
         FROM cursor c LEFT JOIN outbox_messages m ON m.id = ANY (ARRAY(SELECT k.id FROM kept k)) \
         ORDER BY m.aggregate_type, m.aggregate_id, m.sequence",
        head_h = head("h"),
        free_e = free("e"),
        free_m = free("m"),
        columns = row::select_list("m"),
    )
}

/// A PostgreSQL string literal (bench values: quotes doubled).
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
