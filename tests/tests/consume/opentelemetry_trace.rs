//! Feature `opentelemetry`: one trace from the request that saves an order
//! to the handler that consumes it, and on through the event that handler
//! records to its own consumer.
//!
//! request ─┬─ outbox.publish (order placed)
//!          └─ outbox.consume (order placed, inbox handler)
//!               ├─ outbox.publish (invoice requested)
//!               └─ outbox.consume (invoice requested)
//!
//! The consumer's parent is the span that was current when the message was
//! sealed (the envelope's `traceparent`, written once and re-published
//! unchanged), not the publish span, which is its sibling.
//!
//! A test binary of its own: it installs a *global* tracing subscriber, so
//! the spans of the processor's and the subscriber's tasks, on any worker
//! thread, reach the OpenTelemetry layer.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::trace::{SpanId, TraceContextExt as _, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde::{Deserialize, Serialize};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use txoutbox_core::{Delivery, HandlerError, IntegrationEvent};
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig};
use txoutbox_suite::orders::{Order, OrderPlaced};
use txoutbox_suite::subscriber::{SubscriberFixture, eventually};
use txoutbox_suite::{Backend, TestDb};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "otel.invoice.requested")]
struct InvoiceRequested {
    order_id: String,
}

/// The trace the request continues (as if from an incoming HTTP request's
/// `traceparent` and `tracestate`).
const UPSTREAM: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const TRACESTATE: &str = "congo=t61rcWkgMzE";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_from_the_request_to_the_handlers() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("outbox-tests"))),
    )
    .unwrap();

    let test = TestDb::with_schema(Backend::Postgres).await;
    let fx = SubscriberFixture::shared().await;
    let outbox = Outbox::new(
        test.db.clone(),
        OutboxConfig::default()
            .with_subject_prefix(fx.prefix.as_str())
            .unwrap(),
    );
    let processor = outbox
        .processor(JetStreamPublisher::new(fx.jetstream.client(), "/otel-test"))
        .build()
        .unwrap()
        .spawn();

    // The consumer: an inbox handler that records a new event, and a
    // handler of that event.
    let inbox = Inbox::new(&outbox, fx.durable.as_str()).unwrap();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let placed_seen = Arc::clone(&seen);
    let on_placed = inbox.handler_boxed(move |event: OrderPlaced, delivery: Delivery, uow| {
        placed_seen.lock().unwrap().push(seen_of(&delivery));
        Box::pin(async move {
            uow.enqueue(&InvoiceRequested {
                order_id: event.order_id,
            })
            .map_err(HandlerError::permanent)?;
            Ok(())
        })
    });
    let invoice_seen = Arc::clone(&seen);
    let running = fx
        .subscriber()
        .on(on_placed)
        .on(move |_: InvoiceRequested, delivery: Delivery| {
            invoice_seen.lock().unwrap().push(seen_of(&delivery));
            std::future::ready(Ok::<(), HandlerError>(()))
        })
        .build()
        .await
        .unwrap()
        .spawn();

    // The request: saves an order through the repository inside its span.
    let request = tracing::info_span!("http.request");
    let upstream: txoutbox_core::TraceParent = UPSTREAM.parse().unwrap();
    assert!(txoutbox_core::otel::set_parent(
        &request,
        &upstream,
        Some(TRACESTATE)
    ));
    let repository = outbox.repository::<Order>();
    let mut order = Order::place("o-1", 1250).unwrap();
    repository
        .save(&mut order)
        .instrument(request.clone())
        .await
        .unwrap();
    let request_id = request.context().span().span_context().span_id();
    drop(request);

    eventually("both handlers ran", Duration::from_secs(15), || async {
        seen.lock().unwrap().len() == 2
    })
    .await;
    fx.settled(Duration::from_secs(5)).await;
    running.shutdown().await.unwrap();
    processor.shutdown().await.unwrap();
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();

    // One trace: the upstream's, through every span of the chain.
    let trace_id = TraceId::from_hex(upstream.trace_id()).unwrap();
    let request = one(&spans, "http.request", None);
    assert_eq!(request.span_context.span_id(), request_id);
    assert_eq!(
        request.parent_span_id,
        SpanId::from_hex(upstream.parent_id()).unwrap()
    );
    let placed_publish = one(&spans, "outbox.publish", Some("test.order.placed"));
    let placed_consume = one(&spans, "outbox.consume", Some("test.order.placed"));
    let invoice_publish = one(&spans, "outbox.publish", Some("otel.invoice.requested"));
    let invoice_consume = one(&spans, "outbox.consume", Some("otel.invoice.requested"));
    for span in [
        request,
        placed_publish,
        placed_consume,
        invoice_publish,
        invoice_consume,
    ] {
        assert_eq!(span.span_context.trace_id(), trace_id, "{}", span.name);
        assert_eq!(
            span.span_context.trace_state().header(),
            TRACESTATE,
            "{}",
            span.name
        );
    }

    // The parents: the span current at commit (request, then the handler's
    // consume span) is the parent of both the publish and the consume.
    let id = |span: &SpanData| span.span_context.span_id();
    assert_eq!(placed_publish.parent_span_id, id(request));
    assert_eq!(placed_consume.parent_span_id, id(request));
    assert!(placed_consume.parent_span_is_remote);
    assert_eq!(invoice_publish.parent_span_id, id(placed_consume));
    assert_eq!(invoice_consume.parent_span_id, id(placed_consume));

    // What the handlers were delivered: the committing span's traceparent
    // and the tracestate, through the table and the wire.
    let traceparent = |span: &SpanData| format!("00-{trace_id}-{}-01", span.span_context.span_id());
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (traceparent(request), Some(TRACESTATE.to_owned())),
            (traceparent(placed_consume), Some(TRACESTATE.to_owned())),
        ]
    );
    // The consume span still records the ids as fields.
    assert!(
        placed_consume.attributes.iter().any(|kv| {
            kv.key.as_str() == "trace_id" && kv.value.as_str() == trace_id.to_string()
        })
    );
    fx.delete().await;
}

/// A delivery's `traceparent` and `tracestate`.
type Seen = (String, Option<String>);

/// The delivery's `traceparent` and `tracestate`.
fn seen_of(delivery: &Delivery) -> Seen {
    (
        delivery.traceparent().unwrap().to_string(),
        delivery.tracestate().map(str::to_owned),
    )
}

/// The one span named `name` (whose `event` attribute is `event`, if given).
fn one<'a>(spans: &'a [SpanData], name: &str, event: Option<&str>) -> &'a SpanData {
    let found: Vec<&SpanData> = spans
        .iter()
        .filter(|span| span.name == name)
        .filter(|span| {
            event.is_none_or(|event| {
                span.attributes
                    .iter()
                    .any(|kv| kv.key.as_str() == "event" && kv.value.as_str() == event)
            })
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {name} span of {event:?} in {:#?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}
