//! What a claim returns: the leased messages of a batch.

use crate::id::LeaseToken;
use crate::message::OutboxMessage;
use chrono::{DateTime, Utc};

/// A lease on a batch of messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The fencing token.
    pub token: LeaseToken,
    /// When the lease ends, by the database clock.
    pub expires_at: DateTime<Utc>,
}

/// A claimed message and how often it was attempted before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedMessage {
    /// The message.
    pub message: OutboxMessage,
    /// Failed attempts so far (transient broker outages do not count).
    pub attempts: u32,
    /// Claims of it that ended without settling it, this one's predecessor
    /// included: its lease ran out because the processor holding it
    /// crashed, was killed or hung (see
    /// [`ABANDONED_LIMIT`](crate::processor::ABANDONED_LIMIT)).
    pub abandoned: u32,
}

impl ClaimedMessage {
    /// Sorts `messages` into publishing order, the order of
    /// [`ClaimedBatch::messages`]: per aggregate, by sequence.
    pub fn sort_for_publishing(messages: &mut [ClaimedMessage]) {
        messages.sort_by(|a, b| a.publishing_key().cmp(&b.publishing_key()));
    }

    /// Whether `other` belongs to the same aggregate (the processor's batches).
    #[cfg(feature = "processor")]
    pub(crate) fn same_aggregate(&self, other: &ClaimedMessage) -> bool {
        self.message.aggregate_type == other.message.aggregate_type
            && self.message.aggregate_id == other.message.aggregate_id
    }

    fn publishing_key(&self) -> (&str, &str, u64) {
        let m = &self.message;
        (&m.aggregate_type, &m.aggregate_id, m.sequence)
    }
}

/// The result of [`OutboxStore::claim`](super::OutboxStore::claim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedBatch {
    /// The lease on every message of the batch.
    pub lease: Lease,
    /// The messages, in publishing order: per aggregate by sequence.
    pub messages: Vec<ClaimedMessage>,
    /// The claim stopped at its limit and may have left publishable
    /// messages behind: the processor claims again at once instead of
    /// waiting for its poll, and again when this batch is settled (it may
    /// have cut an aggregate's run). `false` when it looked at every
    /// aggregate and its limit cut nothing (what it left is leased, backing
    /// off, or behind an earlier message), and for a claim by ids.
    ///
    /// Not the same as a full batch: a claim can stop at its limit and still
    /// come back a few messages short (a run cut where another transaction
    /// held a row), and a processor that took a short batch for "nothing
    /// left" waited a poll with the rest of the backlog untouched.
    pub more: bool,
}
