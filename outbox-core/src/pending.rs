//! An event recorded by domain code, serialized and waiting to be saved.

use chrono::{DateTime, Utc};

use crate::event::IntegrationEvent;
use crate::headers::{Headers, InvalidHeader};
use crate::id::MessageId;
use crate::payload::Payload;
use crate::subject::EventSubject;

/// An event that domain code recorded and that has not been saved yet.
///
/// Recording serializes the event at once, so a serialization error surfaces
/// where the event is recorded, not at commit. Saving turns it into an
/// [`OutboxMessage`](crate::OutboxMessage) by adding the aggregate, the
/// sequence number and the [`MessageContext`](crate::MessageContext).
///
/// ```
/// use txoutbox_core::{IntegrationEvent, PendingMessage};
/// # use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize, IntegrationEvent)]
/// #[event(name = "order.placed")]
/// struct OrderPlaced { order_id: u64 }
///
/// let pending = PendingMessage::new(&OrderPlaced { order_id: 7 })?;
/// assert_eq!(pending.event_name(), "order.placed");
/// assert_eq!(pending.payload().as_str(), r#"{"order_id":7}"#);
/// # Ok::<(), txoutbox_core::RecordError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingMessage {
    id: MessageId,
    event_name: &'static str,
    event_version: u32,
    subject: EventSubject,
    rust_type: &'static str,
    occurred_at: DateTime<Utc>,
    headers: Headers,
    payload: Payload,
    deliver_at: Option<DateTime<Utc>>,
}

/// Why an event could not be recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// serde could not serialize the event.
    #[error("cannot serialize `{event_name}` v{event_version} ({rust_type})")]
    Serialize {
        /// The event's wire name.
        event_name: &'static str,
        /// The event's version.
        event_version: u32,
        /// The Rust type that failed.
        rust_type: &'static str,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
    /// A header was rejected.
    #[error(transparent)]
    Header(#[from] InvalidHeader),
}

impl PendingMessage {
    /// Serializes `event` into a new pending message with a fresh
    /// [`MessageId`] and the current time as `occurred_at`.
    pub fn new<E: IntegrationEvent>(event: &E) -> Result<Self, RecordError> {
        let raw =
            serde_json::value::to_raw_value(event).map_err(|source| RecordError::Serialize {
                event_name: E::NAME,
                event_version: E::VERSION,
                rust_type: std::any::type_name::<E>(),
                source,
            })?;
        let payload = Payload::from_raw(raw);
        Ok(Self {
            id: MessageId::new(),
            event_name: E::NAME,
            event_version: E::VERSION,
            subject: E::SUBJECT,
            rust_type: std::any::type_name::<E>(),
            occurred_at: Utc::now(),
            headers: Headers::new(),
            payload,
            deliver_at: None,
        })
    }

    /// Publishes this message no earlier than `at` (a delayed message: a
    /// reminder, a timeout). Per-aggregate order still holds: the later
    /// messages of its aggregate wait behind it. It is published by the
    /// first claim after `at` (within the processor's `poll_interval`).
    ///
    /// ```
    /// # use txoutbox_core::{IntegrationEvent, PendingMessage};
    /// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
    /// # #[event(name = "cart.abandoned")] struct CartAbandoned { cart_id: u64 }
    /// let at = chrono::Utc::now() + chrono::Duration::hours(1);
    /// let reminder = PendingMessage::new(&CartAbandoned { cart_id: 7 })?.with_deliver_at(at);
    /// assert_eq!(reminder.deliver_at(), Some(at));
    /// # Ok::<(), txoutbox_core::RecordError>(())
    /// ```
    pub fn with_deliver_at(mut self, at: DateTime<Utc>) -> Self {
        self.deliver_at = Some(at);
        self
    }

    /// When the message may be published, if it is delayed.
    pub fn deliver_at(&self) -> Option<DateTime<Utc>> {
        self.deliver_at
    }

    /// Adds a header to this message only.
    pub fn with_header(
        mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<Self, RecordError> {
        self.headers.insert(name, value)?;
        Ok(self)
    }

    /// The message id (later `Nats-Msg-Id`).
    pub fn id(&self) -> MessageId {
        self.id
    }

    /// The event's wire name.
    pub fn event_name(&self) -> &'static str {
        self.event_name
    }

    /// The event's version.
    pub fn event_version(&self) -> u32 {
        self.event_version
    }

    /// How the subject will be chosen.
    pub fn subject(&self) -> EventSubject {
        self.subject
    }

    /// The Rust type that was recorded, for diagnostics.
    pub fn rust_type(&self) -> &'static str {
        self.rust_type
    }

    /// When the event was recorded.
    pub fn occurred_at(&self) -> DateTime<Utc> {
        self.occurred_at
    }

    /// Headers set on this message.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// The serialized event.
    pub fn payload(&self) -> &Payload {
        &self.payload
    }

    pub(crate) fn into_payload_and_headers(self) -> (Payload, Headers) {
        (self.payload, self.headers)
    }
}
