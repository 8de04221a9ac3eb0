//! The names of the wire contract's headers, and which names applications
//! may not use: the bottom layer, imported by the envelope's headers and by
//! the rest of the wire contract.

/// JetStream's deduplication header; carries the message id.
pub const NATS_MSG_ID: &str = "Nats-Msg-Id";
/// CloudEvents spec version attribute.
pub const SPEC_VERSION: &str = "ce-specversion";
/// The only CloudEvents spec version written and accepted.
pub const SPEC_VERSION_1_0: &str = "1.0";
/// CloudEvents `id`: the message id.
pub const ID: &str = "ce-id";
/// CloudEvents `type`: the event name.
pub const TYPE: &str = "ce-type";
/// CloudEvents `source`: the producing service.
pub const SOURCE: &str = "ce-source";
/// CloudEvents `subject`: the aggregate id.
pub const SUBJECT: &str = "ce-subject";
/// CloudEvents `time`: when the event was recorded.
pub const TIME: &str = "ce-time";
/// The payload's media type.
pub const CONTENT_TYPE: &str = "content-type";
/// The only media type written.
pub const CONTENT_TYPE_JSON: &str = "application/json";
/// Extension: the event version.
pub const EVENT_VERSION: &str = "ce-eventversion";
/// Extension: the aggregate type.
pub const AGGREGATE_TYPE: &str = "ce-aggregatetype";
/// Extension: the per-aggregate sequence.
pub const SEQUENCE: &str = "ce-sequence";
/// Extension: the correlation id.
pub const CORRELATION_ID: &str = "ce-correlationid";
/// Extension: the causation id.
pub const CAUSATION_ID: &str = "ce-causationid";
/// Extension: the tenant.
pub const TENANT: &str = "ce-tenant";
/// W3C trace context.
pub const TRACEPARENT: &str = "traceparent";
/// W3C vendor trace state, travelling with the `traceparent`.
pub const TRACESTATE: &str = "tracestate";

/// Whether `name` is reserved by this contract, so it cannot be an
/// application header: every `ce-*` and `Nats-*` name, `content-type`,
/// `traceparent` and `tracestate`, in any case.
pub fn is_reserved(name: &str) -> bool {
    let starts_with = |prefix: &str| {
        name.get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    };
    starts_with("ce-")
        || starts_with("nats-")
        || [CONTENT_TYPE, TRACEPARENT, TRACESTATE]
            .iter()
            .any(|reserved| name.eq_ignore_ascii_case(reserved))
}

/// What keeps `value` from arriving as it was sent in a NATS header, if
/// anything: a line break (CR or LF; async-nats panics on one), or
/// whitespace at either end (a client trims it off what it receives).
pub(crate) fn not_carried(value: &str) -> Option<&'static str> {
    if value.contains(['\r', '\n']) {
        Some("contains a line break (CR or LF)")
    } else if value.trim() != value {
        Some("begins or ends with whitespace, which a NATS client drops")
    } else {
        None
    }
}
