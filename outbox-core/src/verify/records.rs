//! What a reconciliation compares: the table's published rows, the
//! stream's messages, and the table's stale pending rows.

use std::time::Duration;

use crate::id::MessageId;

/// A row of the outbox table marked published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedRecord {
    /// The message id (its `Nats-Msg-Id`).
    pub id: MessageId,
    /// Its aggregate's type.
    pub aggregate_type: String,
    /// Its aggregate's id.
    pub aggregate_id: String,
    /// Its position in the aggregate's history.
    pub sequence: u64,
    /// The stream sequence the broker acknowledged, as recorded.
    pub stream_sequence: Option<u64>,
}

/// Where a stored message sits in its aggregate's history, from its
/// headers (`ce-aggregatetype`, `ce-subject`, `ce-sequence`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AggregatePosition {
    /// The aggregate's type.
    pub aggregate_type: String,
    /// The aggregate's id.
    pub aggregate_id: String,
    /// The message's sequence in it.
    pub sequence: u64,
}

/// A message stored in the stream, as far as the reconciliation needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamedMessage {
    /// Its stream sequence.
    pub stream_sequence: u64,
    /// Its `Nats-Msg-Id`, if it has one.
    pub message_id: Option<String>,
    /// Its aggregate position, if its headers name one.
    pub position: Option<AggregatePosition>,
}

/// A pending row older than the threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StalePending {
    /// The message id.
    pub id: MessageId,
    /// Its event name.
    pub event_name: String,
    /// Its aggregate's type.
    pub aggregate_type: String,
    /// Its aggregate's id.
    pub aggregate_id: String,
    /// Its sequence in the aggregate.
    pub sequence: u64,
    /// Publish attempts spent on it.
    pub attempts: u32,
    /// How long ago it was written, by the database clock.
    pub age: Duration,
}
