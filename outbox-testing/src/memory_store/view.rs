//! Reading the in-memory table back: what a test asserts on.

use chrono::{DateTime, Utc};
use txoutbox_core::store::SkipNote;
use txoutbox_core::{MessageId, OutboxMessage};

use super::MemoryStore;
use super::row::{Row, Status};

/// Where a stored message is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RowStatus {
    /// Waiting to be published (leased or not, due or backing off).
    Pending,
    /// Acknowledged by the broker.
    Published,
    /// Not retried any more; its aggregate waits behind it.
    Dead,
    /// Dead, then settled unpublished by an operator
    /// ([`OutboxAdmin::skip_dead`](txoutbox_core::store::OutboxAdmin::skip_dead)).
    Skipped,
}

/// A row of the in-memory outbox table: the message and its bookkeeping,
/// as a test reads it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MemoryRow {
    /// The envelope.
    pub message: OutboxMessage,
    /// Pending, published or dead.
    pub status: RowStatus,
    /// Failed attempts so far.
    pub attempts: u32,
    /// Claims of it that ended with their lease running out.
    pub abandoned: u32,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// When a pending message may be claimed next (its backoff or delay).
    pub next_attempt_at: DateTime<Utc>,
    /// The broker's stream sequence, once published.
    pub stream_sequence: Option<u64>,
    /// Under a lease that has not run out.
    pub leased: bool,
    /// For a skipped message: who skipped it and why.
    pub skip_note: Option<SkipNote>,
}

impl MemoryStore {
    /// Every stored message, per aggregate (type, then id) by sequence.
    pub fn messages(&self) -> Vec<MemoryRow> {
        let now = self.clock.now();
        let table = self.table();
        table
            .aggregates
            .values()
            .flat_map(|sequences| sequences.values())
            .filter_map(|id| table.rows.get(id))
            .map(|row| stored(row, now))
            .collect()
    }

    /// One stored message.
    pub fn message(&self, id: MessageId) -> Option<MemoryRow> {
        let now = self.clock.now();
        self.table().rows.get(&id).map(|row| stored(row, now))
    }

    /// Messages waiting to be published, per aggregate by sequence.
    pub fn pending(&self) -> Vec<OutboxMessage> {
        self.with_status(RowStatus::Pending)
    }

    /// Messages the broker acknowledged, per aggregate by sequence.
    pub fn published(&self) -> Vec<OutboxMessage> {
        self.with_status(RowStatus::Published)
    }

    /// Dead messages, per aggregate by sequence.
    pub fn dead(&self) -> Vec<OutboxMessage> {
        self.with_status(RowStatus::Dead)
    }

    /// Whether a processor has anything to do now: a message it could claim
    /// at this instant, or one under a live lease (being published).
    pub fn has_work_now(&self) -> bool {
        let now = self.clock.now();
        let table = self.table();
        table.aggregates.values().any(|sequences| {
            sequences
                .values()
                .filter_map(|id| table.rows.get(id))
                .find(|row| !row.is_settled())
                .is_some_and(|head| head.is_publishable(now))
        }) || table.rows.values().any(|row| row.is_leased(now))
    }

    fn with_status(&self, status: RowStatus) -> Vec<OutboxMessage> {
        self.messages()
            .into_iter()
            .filter(|m| m.status == status)
            .map(|m| m.message)
            .collect()
    }
}

fn stored(row: &Row, now: DateTime<Utc>) -> MemoryRow {
    MemoryRow {
        message: row.message.clone(),
        status: match row.status {
            Status::Pending => RowStatus::Pending,
            Status::Published => RowStatus::Published,
            Status::Dead => RowStatus::Dead,
            Status::Skipped => RowStatus::Skipped,
        },
        attempts: row.attempts,
        abandoned: row.abandoned,
        last_error: row.last_error.clone(),
        next_attempt_at: row.next_attempt_at,
        stream_sequence: row.stream_sequence,
        leased: row.is_leased(now),
        skip_note: row.skip_note.clone(),
    }
}
