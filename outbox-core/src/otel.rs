//! OpenTelemetry glue (feature `opentelemetry`): one trace from the request
//! that saves a message to the handler that consumes it.
//!
//! - Sealing a message ([`OutboxMessage::seal`](crate::OutboxMessage::seal)) inside a span whose
//!   OpenTelemetry context is valid stores that context as the envelope's
//!   `traceparent` and `tracestate`, unless the
//!   [`MessageContext`](crate::MessageContext) was given one with
//!   [`with_traceparent`](crate::MessageContext::with_traceparent). A
//!   context inherited from a handled message
//!   ([`caused_by`](crate::MessageContext::caused_by)) gives way to the
//!   current span: inside a handler that is the consumer's span, a child of
//!   that message's trace, so the chain stays one trace with the right
//!   parents.
//! - The processor's `outbox.publish` span is a child of the envelope's
//!   trace context.
//! - A consumer makes its span a child of the envelope's trace context with
//!   [`set_parent`] (the NATS subscriber of `outbox-nats` does so for its
//!   `outbox.consume` span when its `opentelemetry` feature is on).
//!
//! The envelope is written once and re-published unchanged, so the
//! consumer's parent is the span that was current when the message was
//! sealed (not one particular publish attempt, which may be repeated);
//! the publish span is its sibling under that same parent.
//!
//! Spans only have an OpenTelemetry context under a
//! [`tracing_opentelemetry`] layer; without one every function here finds
//! nothing and changes nothing.

use opentelemetry::Context;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::trace::TraceParent;

/// The W3C trace context of one span: what the envelope stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// The `traceparent`: the span's trace id, its span id and flags.
    pub traceparent: TraceParent,
    /// The vendor `tracestate`, when there is one.
    pub tracestate: Option<String>,
}

/// The OpenTelemetry trace context of the current [`tracing::Span`], when it
/// has a valid one.
pub fn current() -> Option<TraceContext> {
    of_span(&tracing::Span::current())
}

/// The OpenTelemetry trace context of `span`, when it has a valid one (it
/// is enabled and a `tracing-opentelemetry` layer records it).
pub fn of_span(span: &tracing::Span) -> Option<TraceContext> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    of_span_context(&span_context)
}

/// The W3C trace context of an OpenTelemetry span context, when it is valid.
pub fn of_span_context(span_context: &SpanContext) -> Option<TraceContext> {
    if !span_context.is_valid() {
        return None;
    }
    let traceparent = format!(
        "00-{}-{}-{:02x}",
        span_context.trace_id(),
        span_context.span_id(),
        span_context.trace_flags().to_u8()
    )
    .parse()
    .ok()?;
    let tracestate = span_context.trace_state().header();
    Some(TraceContext {
        traceparent,
        tracestate: (!tracestate.is_empty()).then_some(tracestate),
    })
}

/// The remote OpenTelemetry span context `traceparent` and `tracestate`
/// stand for; an unreadable `tracestate` is left out.
pub fn remote_span_context(traceparent: &TraceParent, tracestate: Option<&str>) -> SpanContext {
    let trace_id = TraceId::from_hex(traceparent.trace_id()).unwrap_or(TraceId::INVALID);
    let span_id = SpanId::from_hex(traceparent.parent_id()).unwrap_or(SpanId::INVALID);
    let state = tracestate
        .and_then(|state| state.parse::<TraceState>().ok())
        .unwrap_or_default();
    SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(traceparent.flags()),
        true,
        state,
    )
}

/// The OpenTelemetry context with the remote parent `traceparent` (and
/// `tracestate`), when it is valid.
pub fn remote_context(traceparent: &TraceParent, tracestate: Option<&str>) -> Option<Context> {
    let span_context = remote_span_context(traceparent, tracestate);
    span_context
        .is_valid()
        .then(|| Context::new().with_remote_span_context(span_context))
}

/// Makes `span` a child of the trace context `traceparent` (and
/// `tracestate`) carry. Call it before the span is first entered: an
/// OpenTelemetry span's parent cannot change once it started. Returns
/// whether the parent was set (not when `span` is disabled, has no
/// OpenTelemetry layer or already started).
pub fn set_parent(
    span: &tracing::Span,
    traceparent: &TraceParent,
    tracestate: Option<&str>,
) -> bool {
    remote_context(traceparent, tracestate).is_some_and(|parent| span.set_parent(parent).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_round_trips_through_a_span_context() {
        let tp: TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap();
        let span_context = remote_span_context(&tp, Some("vendor=opaque,other=1"));
        assert!(span_context.is_valid() && span_context.is_remote());
        let back = of_span_context(&span_context).unwrap();
        assert_eq!(back.traceparent, tp);
        assert_eq!(back.tracestate.as_deref(), Some("vendor=opaque,other=1"));
        let unsampled: TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
            .parse()
            .unwrap();
        let span_context = remote_span_context(&unsampled, Some("not a trace state"));
        assert!(!span_context.is_sampled());
        assert_eq!(of_span_context(&span_context).unwrap().tracestate, None);
    }

    #[test]
    fn without_a_layer_there_is_no_context() {
        let span = tracing::info_span!("no subscriber");
        assert_eq!(of_span(&span), None);
        assert_eq!(current(), None);
        assert!(of_span_context(&SpanContext::NONE).is_none());
    }
}
