//! The outbox message: the envelope written to the outbox table and published.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::context::MessageContext;
use crate::headers::Headers;
use crate::id::MessageId;
use crate::payload::Payload;
use crate::pending::PendingMessage;
use crate::subject::SubjectPrefix;
use crate::trace::TraceParent;

/// The aggregate a message belongs to and its place in that aggregate's
/// history. Messages of one aggregate are published in `sequence` order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AggregateRef {
    /// The aggregate type, e.g. `order`.
    pub aggregate_type: String,
    /// The aggregate's id, as text.
    pub aggregate_id: String,
    /// Strictly increasing per aggregate (it follows the aggregate's version);
    /// not necessarily contiguous.
    pub sequence: u64,
}

/// One message of the outbox: an event with everything needed to publish,
/// order, trace and deduplicate it.
///
/// It is what a unit of work writes as one outbox row, what the processor
/// publishes, and what a consumer can rebuild from the NATS headers alone
/// (see [`crate::wire`] for the header names).
///
/// | field | meaning | on the wire |
/// |---|---|---|
/// | `id` | UUIDv7, assigned at `record` | `ce-id`, `Nats-Msg-Id` |
/// | `event_name`, `event_version` | the type's wire name and version | `ce-type`, `ce-eventversion` |
/// | `subject` | the NATS subject | the message subject |
/// | `aggregate_type`, `aggregate_id` | whose history it belongs to | `ce-aggregatetype`, `ce-subject` |
/// | `sequence` | order within the aggregate | `ce-sequence` |
/// | `occurred_at` | when it was recorded (UTC) | `ce-time` |
/// | `correlation_id` | the conversation it belongs to; its own id for a root message | `ce-correlationid` |
/// | `causation_id` | the message or command that caused it | `ce-causationid` |
/// | `tenant` | optional tenant | `ce-tenant` |
/// | `traceparent` | W3C trace context, when one was set | `traceparent` |
/// | `tracestate` | W3C vendor trace state, when there is one | `tracestate` |
/// | `headers` | application headers | as they are |
/// | `payload` | the event as JSON | the body |
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxMessage {
    /// The message id.
    pub id: MessageId,
    /// The event's wire name, e.g. `order.placed`.
    pub event_name: String,
    /// The event's schema version.
    pub event_version: u32,
    /// The NATS subject to publish on.
    pub subject: String,
    /// The aggregate type.
    pub aggregate_type: String,
    /// The aggregate id.
    pub aggregate_id: String,
    /// The position in the aggregate's history.
    pub sequence: u64,
    /// When the event was recorded.
    pub occurred_at: DateTime<Utc>,
    /// The correlation id.
    pub correlation_id: String,
    /// The causation id, if any.
    pub causation_id: Option<String>,
    /// The tenant, if any.
    pub tenant: Option<String>,
    /// The W3C trace context, if any.
    pub traceparent: Option<TraceParent>,
    /// The W3C `tracestate` travelling with the `traceparent`, if any.
    ///
    /// Stored without a column of its own: the outbox table keeps it in the
    /// `headers` JSON under the reserved name `tracestate`, which no
    /// application header can take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
    /// Application headers.
    pub headers: Headers,
    /// The event, serialized as JSON.
    pub payload: Payload,
    /// For a delayed message ([`PendingMessage::with_deliver_at`]), when it
    /// may be published: set on a message being written, `None` on one read
    /// back from the store or the wire (it is not part of the envelope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver_at: Option<DateTime<Utc>>,
}

impl MessageContext {
    /// The context for messages written while handling `message`: same
    /// correlation, tenant and trace, caused by `message`.
    pub fn caused_by(message: &OutboxMessage) -> Self {
        Self::inheriting(
            message.correlation_id.clone(),
            message.id.to_string(),
            message.tenant.clone(),
            message.traceparent.clone(),
            message.tracestate.clone(),
        )
    }
}

/// The aggregate type of messages written without an aggregate. Each such
/// message is its own ordering group (its id is the aggregate id, its
/// sequence 1), so they are published in parallel, in no particular order.
pub const STANDALONE: &str = "standalone";

impl OutboxMessage {
    /// Seals an event that belongs to no aggregate: its own ordering group,
    /// aggregate type [`STANDALONE`], its id as the aggregate id, sequence 1.
    /// Under a partitioned prefix its partition is that of this aggregate
    /// (`standalone`, its id), so standalone messages spread over every
    /// partition.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// use txoutbox_core::{IntegrationEvent, MessageContext, OutboxMessage, Partitions};
    /// use txoutbox_core::{PendingMessage, SubjectPrefix};
    ///
    /// #[derive(Serialize, Deserialize, IntegrationEvent)]
    /// #[event(name = "report.ready")]
    /// struct ReportReady { report: u32 }
    ///
    /// let partitions = Partitions::new(8)?;
    /// let prefix = SubjectPrefix::default().with_partitions(partitions);
    /// let pending = PendingMessage::new(&ReportReady { report: 1 })?;
    /// let message = OutboxMessage::standalone(pending, &MessageContext::new(), &prefix);
    /// let k = partitions.of("standalone", &message.id.to_string());
    /// assert_eq!(message.subject, format!("events.p{k}.report.ready"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn standalone(
        pending: PendingMessage,
        context: &MessageContext,
        prefix: &SubjectPrefix,
    ) -> Self {
        let owner = AggregateRef {
            aggregate_type: STANDALONE.to_owned(),
            aggregate_id: pending.id().to_string(),
            sequence: 1,
        };
        Self::seal(pending, owner, context, prefix)
    }

    /// Seals a recorded event into a message of `aggregate`, stamping the
    /// context's correlation, causation, tenant, trace and headers, and
    /// resolving the subject under `prefix` (with the aggregate's partition
    /// token if the prefix is partitioned). Per-message headers win over the
    /// context's.
    ///
    /// With the `opentelemetry` feature, a context without a trace context
    /// of its own (none set, or one inherited from a handled message) takes
    /// the current span's OpenTelemetry context (see `txoutbox_core::otel`).
    pub fn seal(
        pending: PendingMessage,
        aggregate: AggregateRef,
        context: &MessageContext,
        prefix: &SubjectPrefix,
    ) -> Self {
        let id = pending.id();
        let event_name = pending.event_name();
        let subject = pending.subject().resolve_for(
            prefix,
            &aggregate.aggregate_type,
            &aggregate.aggregate_id,
            event_name,
        );
        let (event_version, occurred_at) = (pending.event_version(), pending.occurred_at());
        let deliver_at = pending.deliver_at();
        let (payload, own_headers) = pending.into_payload_and_headers();
        let mut headers = context.headers().clone();
        headers.extend(&own_headers);
        let (traceparent, tracestate) = context.trace_to_seal();
        Self {
            id,
            event_name: event_name.to_owned(),
            event_version,
            subject,
            aggregate_type: aggregate.aggregate_type,
            aggregate_id: aggregate.aggregate_id,
            sequence: aggregate.sequence,
            occurred_at,
            correlation_id: context
                .correlation_id()
                .map_or_else(|| id.to_string(), str::to_owned),
            causation_id: context.causation_id().map(str::to_owned),
            tenant: context.tenant().map(str::to_owned),
            traceparent,
            tracestate,
            headers,
            payload,
            deliver_at,
        }
    }
}
