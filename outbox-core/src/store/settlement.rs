//! What the processor reports back for a leased batch: published messages,
//! failures, and what the store did with them.

use crate::id::MessageId;

/// A message the broker acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    /// The message.
    pub id: MessageId,
    /// The JetStream stream sequence from the ack, when known.
    pub stream_sequence: Option<u64>,
}

/// Whether a failed message may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Try again after a backoff, until the attempts run out.
    Retryable,
    /// Never try again: the message goes to `dead` at once.
    Permanent,
}

/// A message whose publishing failed for a reason of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The message.
    pub id: MessageId,
    /// What went wrong, kept as the row's last error.
    pub error: String,
    /// Whether to retry.
    pub kind: FailureKind,
}

/// What an operation on leased rows did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseOutcome {
    /// Rows changed.
    pub applied: u64,
    /// Rows asked for that no longer carry the token (lease lost to another
    /// processor, or already settled): nothing was changed on them.
    pub stale: u64,
}

impl LeaseOutcome {
    /// `applied` rows changed, `stale` rows no longer under the token.
    pub fn new(applied: u64, stale: u64) -> Self {
        Self { applied, stale }
    }
}
