//! The subscriber's `outbox.consume` span continues the producer's trace.
//!
//! A test binary of its own: it installs a *global* tracing subscriber. A
//! thread-local one (`set_default`) beside other tests' threads could miss
//! the span when another thread registered its callsite first, with no
//! subscriber, at the same moment.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tracing_subscriber::layer::SubscriberExt;
use txoutbox_core::{Delivery, HandlerError, IntegrationEvent};
use txoutbox_suite::subscriber::{SubscriberFixture, eventually};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "sub.traced")]
struct Traced {
    n: u64,
}

type Log<T> = Arc<Mutex<Vec<T>>>;

/// The span of a message carries the producer's trace id and span id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_span_continues_the_producers_trace() {
    let fields: Log<(String, String)> = Log::default();
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(SpanFields(Arc::clone(&fields))),
    )
    .unwrap();
    let fx = SubscriberFixture::shared().await;
    let mut message = fx.message(&Traced { n: 1 }, "a", 1);
    message.traceparent = Some(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    fx.publish(&message).await;
    let handled: Log<u64> = Log::default();
    let seen = Arc::clone(&handled);
    let running = fx
        .subscriber()
        .unordered()
        .on(move |event: Traced, _: Delivery| {
            seen.lock().unwrap().push(event.n);
            std::future::ready(Ok::<(), HandlerError>(()))
        })
        .build()
        .await
        .unwrap()
        .spawn();
    eventually("handled", Duration::from_secs(5), || async {
        handled.lock().unwrap().len() == 1
    })
    .await;
    fx.settled(Duration::from_secs(5)).await;
    running.shutdown().await.unwrap();

    let fields: BTreeMap<String, String> = fields.lock().unwrap().iter().cloned().collect();
    assert_eq!(
        fields.get("trace_id").map(String::as_str),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    assert_eq!(
        fields.get("parent_span_id").map(String::as_str),
        Some("00f067aa0ba902b7")
    );
    let id = message.id.to_string();
    assert_eq!(fields.get("message_id"), Some(&id));
    assert_eq!(fields.get("event").map(String::as_str), Some("sub.traced"));
    assert_eq!(fields.get("outcome").map(String::as_str), Some("handled"));
    fx.delete().await;
}

/// Records the fields of `outbox.consume` spans.
struct SpanFields(Log<(String, String)>);

impl<S> tracing_subscriber::Layer<S> for SpanFields
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if attrs.metadata().name() == "outbox.consume" {
            attrs.record(&mut FieldLog(&self.0));
        }
    }

    fn on_record(
        &self,
        span: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if ctx
            .span(span)
            .is_some_and(|span| span.name() == "outbox.consume")
        {
            values.record(&mut FieldLog(&self.0));
        }
    }
}

struct FieldLog<'a>(&'a Log<(String, String)>);

impl tracing::field::Visit for FieldLog<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0
            .lock()
            .unwrap()
            .push((field.name().to_owned(), value.to_owned()));
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .lock()
            .unwrap()
            .push((field.name().to_owned(), format!("{value:?}")));
    }
}
