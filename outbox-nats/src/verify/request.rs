//! What a verification is asked ([`VerifyRequest`]) and what it answers
//! ([`VerifyOutcome`]).

use std::time::Duration;

use txoutbox_core::verify::Reconciliation;

/// What to verify: the stream, how far back, and from what age a pending
/// row counts as stale.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyRequest {
    /// The stream the outbox publishes to.
    pub stream: String,
    /// Rows published within this long (all, if `None`; never older than
    /// the stream keeps messages).
    pub since: Option<Duration>,
    /// Pending rows older than this are discrepancies.
    pub pending_older_than: Duration,
}

impl VerifyRequest {
    /// Every row the stream can still hold, pending rows stale after 5
    /// minutes.
    pub fn new(stream: impl Into<String>) -> Self {
        Self {
            stream: stream.into(),
            since: None,
            pending_older_than: Duration::from_secs(300),
        }
    }

    /// Only rows published within `since`.
    #[must_use]
    pub fn since(mut self, since: Duration) -> Self {
        self.since = Some(since);
        self
    }

    /// Pending rows older than `age` are discrepancies.
    #[must_use]
    pub fn pending_older_than(mut self, age: Duration) -> Self {
        self.pending_older_than = age;
        self
    }
}

/// What a verify run checked and found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyOutcome {
    /// How far back rows were checked: the request's `since`, cut to what
    /// the stream keeps (its `max_age` less a minute); `None`: every row.
    pub within: Option<Duration>,
    /// The comparison.
    pub report: Reconciliation,
}
