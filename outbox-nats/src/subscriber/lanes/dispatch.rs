//! From a JetStream message to a decision: rebuild the envelope, pick the
//! handler by event name, decode into its type, run it.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures::FutureExt;
use tracing::Span;
use tracing::field::Empty;
use txoutbox_core::consumer::FailureCause;
use txoutbox_core::{
    DecodeError, Delivery, ErrorChain, EventRegistry, HandlerError, OutboxMessage, wire,
};

use crate::subscriber::dead_letters::DeadLetterKind;
use crate::subscriber::health::{HANDLER_DURATION_SECONDS, UNKNOWN_EVENT};
use crate::subscriber::setup::Shared;

/// A message as the subscriber holds it.
pub(crate) struct Incoming {
    /// The JetStream message (to ack).
    pub(crate) message: jetstream::Message,
    /// How many times JetStream delivered it, this time included.
    pub(crate) deliveries: u64,
    /// Its stream sequence.
    pub(crate) stream_sequence: u64,
}

/// Why a message is acked.
// Exhaustive: only the hidden in-process harness sees it, and its match
// must break when an outcome is added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    /// Its handler returned `Ok`.
    Handled,
    /// No handler takes its event.
    Ignored,
    /// Its aggregate is held: parked behind the hold.
    Held,
}

impl Acked {
    /// The `outcome` label of the consumer's metrics.
    pub fn label(self) -> &'static str {
        match self {
            Acked::Handled => "handled",
            Acked::Ignored => "ignored",
            Acked::Held => "held",
        }
    }
}

/// What to do with a message.
#[derive(Debug)]
pub(crate) enum Decision {
    /// Ack it.
    Ack { outcome: Acked },
    /// Nak it for redelivery after `delay`.
    Retry { delay: Duration, reason: String },
    /// It can never be handled here.
    Dead {
        kind: DeadLetterKind,
        reason: String,
    },
    /// Not the message's fault (its inbox's database is away, or other
    /// transactions were in the way): it is not settled and spends no
    /// delivery; it goes back to its lane and is applied again (after the
    /// pause, for an outage).
    Wait { cause: FailureCause, reason: String },
}

/// A decision and the `event` label of the message.
pub(crate) struct Verdict {
    pub(crate) decision: Decision,
    pub(crate) event: &'static str,
}

/// The verdict of a message whose effects committed with its inbox group
/// (or that its inbox found applied before).
pub(crate) fn handled(event: &'static str) -> Verdict {
    Verdict {
        decision: Decision::Ack {
            outcome: Acked::Handled,
        },
        event,
    }
}

/// The `(name, value)` pairs of a message's headers.
pub(crate) fn header_pairs(message: &async_nats::Message) -> Vec<(&str, &str)> {
    message
        .headers
        .as_ref()
        .map(header_pairs_of)
        .unwrap_or_default()
}

/// Every header of `headers` as `(name, value)` pairs.
pub(crate) fn header_pairs_of(headers: &async_nats::HeaderMap) -> Vec<(&str, &str)> {
    headers
        .iter()
        .flat_map(|(name, values)| {
            let name: &str = name.as_ref();
            values.iter().map(move |value| (name, value.as_str()))
        })
        .collect()
}

/// The first value of header `name` (any case).
pub(crate) fn header<'a>(pairs: &[(&'a str, &'a str)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

impl Incoming {
    /// The message as [`decide_delivered`] and the hold logic read it.
    pub(crate) fn delivered(&self) -> Delivered<'_> {
        let message = &self.message;
        Delivered {
            subject: &message.subject,
            headers: header_pairs(message),
            payload: &message.payload,
            stream_sequence: self.stream_sequence,
            deliveries: self.deliveries,
        }
    }
}

/// A message as delivered: what [`decide_delivered`] needs of it, whether
/// it comes from JetStream, from where a held aggregate parked it, or from
/// the in-process harness.
pub(crate) struct Delivered<'a> {
    /// The subject it was published on.
    pub(crate) subject: &'a str,
    /// Its headers.
    pub(crate) headers: Vec<(&'a str, &'a str)>,
    /// Its payload.
    pub(crate) payload: &'a [u8],
    /// Its stream sequence.
    pub(crate) stream_sequence: u64,
    /// How many times it was delivered, this time included.
    pub(crate) deliveries: u64,
}

/// The `outbox.consume` span of one delivery; [`decide_delivered`] records
/// the envelope's fields in it, the settling code the `outcome`.
pub(crate) fn consume_span(consumer: &str, stream_sequence: u64, delivery: u64) -> Span {
    tracing::info_span!(
        "outbox.consume",
        consumer = %consumer,
        stream_sequence,
        delivery,
        event = Empty,
        event_version = Empty,
        message_id = Empty,
        aggregate_type = Empty,
        aggregate_id = Empty,
        sequence = Empty,
        correlation_id = Empty,
        trace_id = Empty,
        parent_span_id = Empty,
        outcome = Empty,
    )
}

/// Decides what to do with a message as delivered, running its handler if
/// it has one. Never panics, whatever the message or the handler does.
pub(crate) async fn decide_delivered(
    shared: &Arc<Shared>,
    delivered: &Delivered<'_>,
    span: &Span,
) -> Verdict {
    let envelope = match wire::decode(
        delivered.subject,
        delivered.headers.iter().copied(),
        delivered.payload,
    ) {
        Ok(envelope) => envelope,
        Err(err) => {
            let reason = ErrorChain(&err).to_string();
            return dead(DeadLetterKind::InvalidEnvelope, reason, None);
        }
    };
    record(span, &envelope);
    let Some(handler) = shared.handlers.get(&envelope.event_name) else {
        return unhandled(shared, &envelope);
    };
    let event = handler.registration().name();
    let delivery = delivery_of(shared, envelope, delivered);
    let started = Instant::now();
    // A handler may panic while creating its future, or while it runs.
    let calling = std::panic::catch_unwind(AssertUnwindSafe(|| {
        handler.call(&shared.registry, delivery)
    }));
    let result = match calling {
        Ok(Ok(running)) => AssertUnwindSafe(running).catch_unwind().await,
        Ok(Err(err)) => {
            let reason = ErrorChain(&err).to_string();
            return dead(decode_kind(&err), reason, Some(event));
        }
        Err(panic) => Err(panic),
    };
    record_duration(shared, event, started);
    verdict_of(shared, delivered.deliveries, event, result)
}

/// The delivery a handler gets for `envelope`, delivered as `delivered`.
pub(crate) fn delivery_of(
    shared: &Shared,
    envelope: OutboxMessage,
    delivered: &Delivered<'_>,
) -> Delivery {
    Delivery::new(envelope)
        .with_consumer(Arc::clone(&shared.consumer))
        .with_stream(Arc::clone(&shared.stream), delivered.stream_sequence)
        .with_delivery_count(delivered.deliveries)
}

/// Records how long a handler of `event` ran.
pub(crate) fn record_duration(shared: &Shared, event: &'static str, started: Instant) {
    ::metrics::histogram!(
        HANDLER_DURATION_SECONDS,
        "consumer" => Arc::clone(&shared.consumer),
        "event" => event,
    )
    .record(started.elapsed().as_secs_f64());
}

/// What a handler's result (a panic caught as `Err`) means for its
/// message, on its delivery `deliveries`: an error that is not the
/// handler's fault (see [`Shared::cause_of`]) spends no delivery.
pub(crate) fn verdict_of(
    shared: &Shared,
    deliveries: u64,
    event: &'static str,
    result: std::thread::Result<Result<(), HandlerError>>,
) -> Verdict {
    let error = match result {
        Ok(Ok(())) => {
            return Verdict {
                decision: Decision::Ack {
                    outcome: Acked::Handled,
                },
                event,
            };
        }
        Ok(Err(err)) if err.is_permanent() => {
            return dead(DeadLetterKind::Rejected, err.to_string(), Some(event));
        }
        Ok(Err(err)) => {
            let cause = shared.cause_of(&err);
            if cause.spends_no_delivery() {
                return Verdict {
                    decision: Decision::Wait {
                        cause,
                        reason: err.to_string(),
                    },
                    event,
                };
            }
            err.to_string()
        }
        Err(panic) => format!("handler panicked: {}", panic_message(&*panic)),
    };
    failed(shared, deliveries, event, error)
}

/// A message whose handling failed for `error`, retryably, on its delivery
/// `deliveries`: delivered again after its backoff, or dead-lettered on
/// its last delivery.
pub(crate) fn failed(
    shared: &Shared,
    deliveries: u64,
    event: &'static str,
    error: String,
) -> Verdict {
    if deliveries >= shared.max_deliver {
        let reason = format!("handler failed on all {deliveries} deliveries; last error: {error}");
        return dead(DeadLetterKind::Exhausted, reason, Some(event));
    }
    Verdict {
        decision: Decision::Retry {
            delay: shared.backoff.jittered_delay(deliveries),
            reason: error,
        },
        event,
    }
}

fn unhandled(shared: &Shared, envelope: &OutboxMessage) -> Verdict {
    let (name, version) = (&envelope.event_name, envelope.event_version);
    if !shared.dead_letter_unhandled {
        // Logged once per name, for the first names only: names come off
        // the wire, the set must not grow with them.
        let first = shared.unhandled_seen.lock().is_ok_and(|mut seen| {
            !seen.contains(name.as_str()) && seen.len() < UNHANDLED_NAMES_LOGGED && {
                seen.insert(name.clone());
                true
            }
        });
        if first {
            let registered = known(&shared.registry, name);
            tracing::info!(
                consumer = %shared.consumer,
                event = %name,
                registered,
                "no handler takes this event: its messages are acknowledged and counted \
                 (outcome=\"ignored\"); logged once per event name"
            );
        }
        return Verdict {
            decision: Decision::Ack {
                outcome: Acked::Ignored,
            },
            event: UNKNOWN_EVENT,
        };
    }
    let (kind, reason) = if known(&shared.registry, name) {
        (
            DeadLetterKind::NoHandler,
            format!(
                "no handler of consumer `{}` takes `{name}` (v{version})",
                shared.consumer
            ),
        )
    } else {
        (
            DeadLetterKind::UnknownEvent,
            format!("no event type is registered as `{name}` (message has v{version})"),
        )
    };
    dead(kind, reason, None)
}

/// How many distinct unhandled event names a subscriber logs (once each).
const UNHANDLED_NAMES_LOGGED: usize = 1_000;

fn known(registry: &EventRegistry, name: &str) -> bool {
    !registry.versions(name).is_empty()
}

pub(crate) fn dead(kind: DeadLetterKind, reason: String, event: Option<&'static str>) -> Verdict {
    Verdict {
        decision: Decision::Dead { kind, reason },
        event: event.unwrap_or(UNKNOWN_EVENT),
    }
}

pub(crate) fn decode_kind(err: &DecodeError) -> DeadLetterKind {
    match err {
        DecodeError::UnknownEvent { .. } => DeadLetterKind::UnknownEvent,
        DecodeError::UnknownVersion { .. } => DeadLetterKind::UnknownVersion,
        DecodeError::Malformed { .. } => DeadLetterKind::Malformed,
        _ => DeadLetterKind::NotConvertible,
    }
}

/// Adds what the envelope tells to the message's span, including the
/// producer's trace ids as fields for any tracing layer to pick up (with
/// the `opentelemetry` feature the span is also the OpenTelemetry child of
/// that trace context: see `worker::continue_trace`).
pub(crate) fn record(span: &Span, envelope: &OutboxMessage) {
    span.record("event", envelope.event_name.as_str());
    span.record("event_version", envelope.event_version);
    span.record("message_id", tracing::field::display(envelope.id));
    span.record("aggregate_type", envelope.aggregate_type.as_str());
    span.record("aggregate_id", envelope.aggregate_id.as_str());
    span.record("sequence", envelope.sequence);
    span.record("correlation_id", envelope.correlation_id.as_str());
    if let Some(traceparent) = &envelope.traceparent {
        span.record("trace_id", traceparent.trace_id());
        span.record("parent_span_id", traceparent.parent_id());
    }
}

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string payload")
}
