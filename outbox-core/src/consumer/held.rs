//! [`HeldMessages`]: where a consumer keeps an aggregate held behind a
//! message it could not apply, and the later messages of that aggregate,
//! until an operator releases it.
//!
//! When a subscriber that keeps order (`txoutbox_nats::SubscriberBuilder::keep_order`)
//! gives up on a message (its handler rejected it, failed on every delivery,
//! or its payload does not decode), applying the aggregate's later messages
//! would skip a step of its history: `shipped` applied without `paid`. So
//! the message is *parked* with the reason, its aggregate is *held*, and
//! every later message of the aggregate is parked behind it (and
//! acknowledged: a held aggregate holds nothing of JetStream's window).
//! Other aggregates go on. An operator fixes the cause and
//! [releases](Release) the aggregate: the subscriber then applies what is
//! parked, in order, and the aggregate flows again.

use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Utc};

use super::handler_error::BoxError;
use crate::id::MessageId;

/// The future the [`HeldMessages`] methods return.
pub type HeldFuture<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send + 'static>>;

/// A message set aside, exactly as it was delivered, because its aggregate
/// is held.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParkedMessage {
    /// The message id (`ce-id`).
    pub message_id: MessageId,
    /// The aggregate it belongs to.
    pub aggregate_type: String,
    /// The aggregate it belongs to.
    pub aggregate_id: String,
    /// Its position in the stream it came from: parked messages are applied
    /// in this order.
    pub stream_sequence: u64,
    /// The subject it was published on.
    pub subject: String,
    /// Its headers, as delivered.
    pub headers: Vec<(String, String)>,
    /// Its payload, as delivered.
    pub payload: Vec<u8>,
    /// Set on the message the aggregate is held behind: why it could not be
    /// applied.
    pub reason: Option<String>,
}

impl ParkedMessage {
    /// A parked message; `reason` is set on the one its aggregate is held
    /// behind.
    #[allow(clippy::too_many_arguments, reason = "a plain record")]
    pub fn new(
        message_id: MessageId,
        aggregate_type: impl Into<String>,
        aggregate_id: impl Into<String>,
        stream_sequence: u64,
        subject: impl Into<String>,
        headers: Vec<(String, String)>,
        payload: Vec<u8>,
        reason: Option<String>,
    ) -> Self {
        Self {
            message_id,
            aggregate_type: aggregate_type.into(),
            aggregate_id: aggregate_id.into(),
            stream_sequence,
            subject: subject.into(),
            headers,
            payload,
            reason,
        }
    }

    /// Its event name (the `ce-type` header), empty when it has none.
    pub fn event_name(&self) -> &str {
        self.headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(crate::wire::TYPE))
            .map_or("", |(_, value)| value.as_str())
    }
}

/// How an operator releases a held aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Release {
    /// Apply the message it is held behind again (its cause was fixed), then
    /// the messages parked after it.
    Retry,
    /// Leave the message it is held behind unapplied for good (recorded as
    /// processed, so no redelivery applies it either), then apply the
    /// messages parked after it.
    Skip,
}

impl Release {
    /// `retry` or `skip`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Skip => "skip",
        }
    }

    /// The release stored as `text`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "retry" => Some(Self::Retry),
            "skip" => Some(Self::Skip),
            _ => None,
        }
    }
}

/// An aggregate held behind a message that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Hold {
    /// The held aggregate.
    pub aggregate_type: String,
    /// The held aggregate.
    pub aggregate_id: String,
    /// The message it is held behind.
    pub message_id: MessageId,
    /// That message's event name.
    pub event_name: String,
    /// Why that message could not be applied.
    pub reason: String,
    /// Messages parked behind it.
    pub waiting: u64,
    /// Set when an operator released the aggregate and the subscriber has
    /// not applied what was parked yet.
    pub release: Option<Release>,
    /// Since when it is held (by the store's clock), when the store knows.
    pub held_since: Option<DateTime<Utc>>,
}

impl Hold {
    /// A hold, as a [`HeldMessages`] implementation reports it.
    pub fn new(
        aggregate_type: impl Into<String>,
        aggregate_id: impl Into<String>,
        message_id: MessageId,
        event_name: impl Into<String>,
        reason: impl Into<String>,
        waiting: u64,
        release: Option<Release>,
    ) -> Self {
        Self {
            aggregate_type: aggregate_type.into(),
            aggregate_id: aggregate_id.into(),
            message_id,
            event_name: event_name.into(),
            reason: reason.into(),
            waiting,
            release,
            held_since: None,
        }
    }

    /// This hold, held since `at`.
    #[must_use]
    pub fn with_held_since(mut self, at: DateTime<Utc>) -> Self {
        self.held_since = Some(at);
        self
    }
}

/// What became of a parked message the subscriber took up again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unpark {
    /// Applied: forget it.
    Applied,
    /// Skipped by the operator: forget it and record it as processed.
    Skipped,
    /// It failed again: the aggregate stays held behind it, for `reason`,
    /// until released again.
    HeldAgain {
        /// Why it failed this time.
        reason: String,
    },
}

/// A consumer's store of held aggregates and parked messages (the inbox:
/// `txoutbox_sea_orm::Inbox` implements it, in the same database as the
/// effects). Implementations must make each call durable before its
/// future resolves: the subscriber acknowledges a message once it is
/// parked.
pub trait HeldMessages: Send + Sync + 'static {
    /// Parks `message`. Parking a message already parked does nothing.
    fn park(&self, message: ParkedMessage) -> HeldFuture<()>;

    /// Every held aggregate of this consumer.
    fn holds(&self) -> HeldFuture<Vec<Hold>>;

    /// The messages parked for an aggregate, in stream order.
    fn parked(
        &self,
        aggregate_type: String,
        aggregate_id: String,
    ) -> HeldFuture<Vec<ParkedMessage>>;

    /// Settles a parked message the subscriber took up again after a
    /// release.
    fn unpark(&self, message: ParkedMessage, outcome: Unpark) -> HeldFuture<()>;
}
