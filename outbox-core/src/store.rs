//! What the processor needs from an outbox table: the [`OutboxStore`] trait.
//!
//! Implemented for PostgreSQL, MySQL/MariaDB and SQLite by `outbox-sea-orm`.
//! Every time-dependent decision (is a lease live, is a retry due) is made
//! with the **database's** clock, never the caller's, so processors on
//! machines with skewed clocks still agree.

use std::future::Future;
use std::time::Duration;

use crate::id::{LeaseToken, MessageId};
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

/// The result of [`OutboxStore::claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedBatch {
    /// The lease on every message of the batch.
    pub lease: Lease,
    /// The messages, in publishing order: per aggregate by sequence.
    pub messages: Vec<ClaimedMessage>,
}

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

/// How failed messages are retried. With the `serde` feature it loads from
/// a configuration file (durations in humantime form, missing fields keep
/// their defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts after which a retryable failure goes to `dead` (default 10).
    pub max_attempts: u32,
    /// Backoff after the first failure (default 1 s); doubles with each
    /// attempt up to `max_backoff`. Stores apply "equal jitter": half of the
    /// delay is fixed, half random, so retries of many messages spread out.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub initial_backoff: Duration,
    /// Longest backoff (default 5 min).
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub max_backoff: Duration,
}

impl RetryPolicy {
    /// A policy of `max_attempts`, backing off from `initial_backoff`
    /// (doubling) up to `max_backoff`.
    pub fn new(max_attempts: u32, initial_backoff: Duration, max_backoff: Duration) -> Self {
        Self {
            max_attempts,
            initial_backoff,
            max_backoff,
        }
    }

    /// The same with `max_attempts`.
    #[must_use]
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// The same with `initial_backoff`.
    #[must_use]
    pub fn with_initial_backoff(mut self, initial_backoff: Duration) -> Self {
        self.initial_backoff = initial_backoff;
        self
    }

    /// The same with `max_backoff`.
    #[must_use]
    pub fn with_max_backoff(mut self, max_backoff: Duration) -> Self {
        self.max_backoff = max_backoff;
        self
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 10,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
        }
    }
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

/// Which dead messages to put back to pending.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadSelector {
    /// These messages.
    Ids(Vec<MessageId>),
    /// Every dead message of this event name.
    EventName(String),
    /// Every dead message.
    All,
}

/// Who skips a dead message and why ([`OutboxStore::skip_dead`]): kept on
/// the row with the time, so the decision can be traced later.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkipNote {
    /// Who decided (an operator's name, `user@host`).
    pub by: String,
    /// Why, if given.
    pub reason: Option<String>,
}

impl SkipNote {
    /// A skip decided by `by`, with no reason given.
    pub fn by(by: impl Into<String>) -> Self {
        Self {
            by: by.into(),
            reason: None,
        }
    }

    /// The same with `reason`.
    #[must_use]
    pub fn because(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }
}

/// Counts for dashboards and alarms (a store builds them from
/// `OutboxStats::default()`, setting the fields). Cheap to compute however many rows
/// the table holds: a store counts a bounded number of pending rows exactly
/// (the oldest first) and estimates past them, never reads published rows,
/// and finds the oldest pending message through an index.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct OutboxStats {
    /// Messages waiting to be published (leased or not); an estimate when
    /// [`pending_is_estimate`](Self::pending_is_estimate) is set.
    pub pending: u64,
    /// More messages are pending than the store counts exactly: `pending` is
    /// an estimate (at least the exact limit), and `leased` and the
    /// per-event pending counts cover the oldest pending messages only.
    pub pending_is_estimate: bool,
    /// Pending messages under a live lease.
    pub leased: u64,
    /// Messages that will not be retried.
    pub dead: u64,
    /// Age of the oldest pending message, by the database clock.
    pub oldest_pending_age: Option<Duration>,
    /// Pending and dead counts per event name, sorted by name.
    pub by_event: Vec<EventStats>,
}

/// Counts of one event name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventStats {
    /// The event name.
    pub event_name: String,
    /// Pending messages.
    pub pending: u64,
    /// Dead messages.
    pub dead: u64,
}

impl EventStats {
    /// The counts of `event_name`.
    pub fn new(event_name: impl Into<String>, pending: u64, dead: u64) -> Self {
        Self {
            event_name: event_name.into(),
            pending,
            dead,
        }
    }
}

/// A store operation failed (the database is unreachable, a statement was
/// rejected, a row could not be read back).
#[derive(Debug, thiserror::Error)]
#[error("outbox store: {message}")]
pub struct StoreError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl StoreError {
    /// An error with a cause.
    pub fn new(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// An error without a cause.
    pub fn msg(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }
}

/// The outbox table as the processor sees it.
///
/// Claims respect per-aggregate order: a message is never handed out while an
/// earlier message of its aggregate is unpublished (pending elsewhere, backing
/// off, or dead), but runs of consecutive messages of one aggregate may be
/// claimed together. Two claimers never receive the same message while its
/// lease is live; an expired lease may be claimed again.
pub trait OutboxStore: Send + Sync {
    /// Leases up to `limit` publishable messages for `lease`. A message
    /// taken over from a lease that ran out has its
    /// [`abandoned`](ClaimedMessage::abandoned) count raised by one (every
    /// settlement ends a lease; only a holder that went away leaves one to
    /// run out), here and in [`claim_ids`](OutboxStore::claim_ids).
    fn claim(
        &self,
        limit: u32,
        lease: Duration,
    ) -> impl Future<Output = Result<ClaimedBatch, StoreError>> + Send;

    /// Leases these messages, by primary key, if they are publishable by the
    /// same rules as [`claim`](OutboxStore::claim): the processor's fast path
    /// for messages it was told were committed (in its own process, or named
    /// by another process's notification), which needs no query to find
    /// them. Ids that are not publishable (already published, leased
    /// elsewhere, behind an unpublished earlier message) are left out.
    fn claim_ids(
        &self,
        ids: &[MessageId],
        lease: Duration,
    ) -> impl Future<Output = Result<ClaimedBatch, StoreError>> + Send;

    /// Marks messages published (or deletes them, per the store's retention).
    fn complete(
        &self,
        token: LeaseToken,
        published: &[Published],
    ) -> impl Future<Output = Result<LeaseOutcome, StoreError>> + Send;

    /// Records failures: attempts + 1 and a backoff by the database clock, or
    /// `dead` with the reason when permanent or out of attempts. The lease ends.
    fn fail(
        &self,
        token: LeaseToken,
        failures: &[Failure],
        policy: &RetryPolicy,
    ) -> impl Future<Output = Result<LeaseOutcome, StoreError>> + Send;

    /// Gives unpublished messages back without spending an attempt.
    fn release(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
    ) -> impl Future<Output = Result<LeaseOutcome, StoreError>> + Send;

    /// Extends the lease of these messages, those still pending under
    /// `token`: `applied` counts them, `stale` the others (taken over by
    /// another processor after the lease ran out, or settled). A batch renews
    /// exactly its own messages, so it notices the loss of any one of them
    /// even when other batches share its token.
    fn renew(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
        lease: Duration,
    ) -> impl Future<Output = Result<LeaseOutcome, StoreError>> + Send;

    /// Puts dead messages back to pending, due now, with no attempts spent
    /// and no abandoned claims counted (a message sent dead as a suspected
    /// killer is published again, not sent dead at its next claim).
    fn requeue_dead(
        &self,
        selector: DeadSelector,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Marks the dead message `id` as deliberately not published: it is kept
    /// (with `note` and the time) but settled, so it no longer holds back its
    /// aggregate: the next claims publish the messages behind it, in order.
    /// Skipped messages are purged with published ones. Returns whether
    /// `id` was dead (and is now skipped); a message that is not dead, or
    /// does not exist, is left alone.
    fn skip_dead(
        &self,
        id: MessageId,
        note: &SkipNote,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Deletes published messages older than `older_than`, at most
    /// `batch_size` rows per statement, until none is left; returns how many.
    fn purge_published(
        &self,
        older_than: Duration,
        batch_size: u32,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Counts by status and event name.
    fn stats(&self) -> impl Future<Output = Result<OutboxStats, StoreError>> + Send;
}
