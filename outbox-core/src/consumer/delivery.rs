//! [`Delivery`]: what a consumer knows about the message it is handling.

use std::sync::Arc;

use crate::context::MessageContext;
use crate::headers::Headers;
use crate::id::MessageId;
use crate::message::OutboxMessage;
use crate::trace::TraceParent;

/// One delivery of a message to a consumer: the envelope rebuilt from the
/// wire (see [`crate::wire`]) and where and how often it was delivered.
///
/// Typed handlers receive it next to the decoded event. It lives in this
/// crate, not in a broker crate, so handler adapters (such as the SeaORM
/// inbox) can name it without depending on the broker.
///
/// ```
/// use txoutbox_core::{Delivery, MessageContext};
/// # fn message() -> txoutbox_core::OutboxMessage { serde_json::from_str(r#"{"id":"0190f5a2-7b3c-7d4e-8f00-112233445566","event_name":"order.placed","event_version":1,"subject":"events.order.placed","aggregate_type":"order","aggregate_id":"7","sequence":3,"occurred_at":"2026-11-23T10:00:00Z","correlation_id":"req-42","causation_id":null,"tenant":null,"traceparent":null,"headers":{},"payload":{"order_id":7}}"#).unwrap() }
/// // A handler under test can be given a hand-made delivery.
/// let delivery = Delivery::new(message())
///     .with_consumer("billing")
///     .with_stream("EVENTS", 1042)
///     .with_delivery_count(2);
/// assert_eq!((delivery.aggregate_id(), delivery.sequence()), ("7", 3));
/// assert!(delivery.is_redelivery());
/// // Messages written while handling it continue its correlation.
/// let ctx: MessageContext = delivery.caused_context();
/// assert_eq!(ctx.correlation_id(), Some("req-42"));
/// assert_eq!(ctx.causation_id(), Some("0190f5a2-7b3c-7d4e-8f00-112233445566"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    message: OutboxMessage,
    consumer: Arc<str>,
    stream: Arc<str>,
    stream_sequence: u64,
    delivery_count: u64,
}

impl Delivery {
    /// A first delivery of `message`, with no consumer or stream recorded
    /// (the subscriber sets them; tests of handlers may leave them empty).
    pub fn new(message: OutboxMessage) -> Self {
        Self {
            message,
            consumer: Arc::from(""),
            stream: Arc::from(""),
            stream_sequence: 0,
            delivery_count: 1,
        }
    }

    /// Sets the name of the consumer (the durable) it was delivered to.
    pub fn with_consumer(mut self, consumer: impl Into<Arc<str>>) -> Self {
        self.consumer = consumer.into();
        self
    }

    /// Sets the stream it was read from and its sequence in that stream.
    pub fn with_stream(mut self, stream: impl Into<Arc<str>>, sequence: u64) -> Self {
        self.stream = stream.into();
        self.stream_sequence = sequence;
        self
    }

    /// Sets how many times it has been delivered, this delivery included (≥ 1).
    pub fn with_delivery_count(mut self, count: u64) -> Self {
        self.delivery_count = count.max(1);
        self
    }

    /// The envelope.
    pub fn message(&self) -> &OutboxMessage {
        &self.message
    }

    /// The envelope, by value.
    pub fn into_message(self) -> OutboxMessage {
        self.message
    }

    /// The message id (`ce-id`, `Nats-Msg-Id`): the key to recognise repeats by.
    pub fn message_id(&self) -> MessageId {
        self.message.id
    }

    /// The event's wire name.
    pub fn event_name(&self) -> &str {
        &self.message.event_name
    }

    /// The event's version as written by the producer (the handler may have
    /// received it upcast to a newer one).
    pub fn event_version(&self) -> u32 {
        self.message.event_version
    }

    /// The aggregate type.
    pub fn aggregate_type(&self) -> &str {
        &self.message.aggregate_type
    }

    /// The aggregate id.
    pub fn aggregate_id(&self) -> &str {
        &self.message.aggregate_id
    }

    /// The message's sequence within its aggregate.
    pub fn sequence(&self) -> u64 {
        self.message.sequence
    }

    /// The correlation id.
    pub fn correlation_id(&self) -> &str {
        &self.message.correlation_id
    }

    /// The causation id, if the message was caused by another.
    pub fn causation_id(&self) -> Option<&str> {
        self.message.causation_id.as_deref()
    }

    /// The tenant, if any.
    pub fn tenant(&self) -> Option<&str> {
        self.message.tenant.as_deref()
    }

    /// The producer's W3C trace context, if any.
    pub fn traceparent(&self) -> Option<&TraceParent> {
        self.message.traceparent.as_ref()
    }

    /// The W3C trace state travelling with the trace context, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.message.tracestate.as_deref()
    }

    /// The application headers.
    pub fn headers(&self) -> &Headers {
        &self.message.headers
    }

    /// The consumer (durable name) it was delivered to; empty if not set.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// The stream it was read from; empty if not set.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// Its sequence in the stream; 0 if not set.
    pub fn stream_sequence(&self) -> u64 {
        self.stream_sequence
    }

    /// How many times it has been delivered, this delivery included.
    pub fn delivery_count(&self) -> u64 {
        self.delivery_count
    }

    /// Whether it was delivered before (a retry, a lost ack, a restart).
    pub fn is_redelivery(&self) -> bool {
        self.delivery_count > 1
    }

    /// The context for messages written while handling this one: same
    /// correlation, tenant and trace, caused by this message
    /// ([`MessageContext::caused_by`]).
    pub fn caused_context(&self) -> MessageContext {
        MessageContext::caused_by(&self.message)
    }
}
