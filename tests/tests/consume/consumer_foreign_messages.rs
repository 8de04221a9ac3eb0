//! A stream is shared infrastructure: other publishers put messages on the
//! subjects a subscriber's filter captures. An ordered subscriber (inbox
//! handlers, the default wiring) on PostgreSQL meets, between good events
//! of one aggregate, each foreign or hostile message below, and gives each
//! its documented outcome (the guide's "Consuming" chapter, "Foreign
//! messages"), never a panic, a stuck aggregate nobody can see, or an
//! effect applied twice:
//!
//! | the message | its outcome |
//! |---|---|
//! | no CloudEvents headers at all | dead-lettered `invalid-envelope`; holds nothing |
//! | a known event, its aggregate's headers, a payload that is not JSON (any content type) | dead-lettered `invalid-envelope`; holds nothing (the outbox writes only JSON, so it is none of the aggregate's events, and a neighbour cannot stop an aggregate with it) |
//! | 512 KiB of JSON that does not fit the event | dead-lettered `malformed`; holds its aggregate (it may be the aggregate's own event of another shape: visible in `Inbox::holds`) |
//! | a known event name with a version the registry does not know | dead-lettered `unknown-version`; holds its aggregate |
//! | an event name nobody registered | acked unhandled (`ignored`) |
//! | a valid envelope with a forged aggregate sequence | applied in stream order (the subscriber orders by stream sequence; the aggregate sequence is the handler's to check) |
//! | a copy of an applied message's id, published past JetStream's dedup | acked as a duplicate by the inbox, never applied |
//! | another producer's message with an existing `Nats-Msg-Id` | dropped by JetStream within its duplicate window (the publisher is told `duplicate`) |

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use txoutbox_core::{IntegrationEvent, OutboxMessage, wire};
use txoutbox_nats::subscriber::dead_lettering;
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig};
use txoutbox_suite::steps::{self, applied};
use txoutbox_suite::subscriber::{StartSubscriber, SubscriberFixture, eventually, header};
use txoutbox_suite::{Backend, TestDb};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "foreign.step.recorded")]
struct StepRecorded {
    step: i64,
}

const WAIT: Duration = Duration::from_secs(20);

/// The headers the outbox publisher sends for `message`.
fn headers_of(message: &OutboxMessage) -> Vec<(String, String)> {
    wire::encode(message, "/tests")
        .expect("the message can be published")
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v))
        .collect()
}

/// `headers` with the value of `name` replaced by `value` (any case).
fn with_header(
    mut headers: Vec<(String, String)>,
    name: &str,
    value: &str,
) -> Vec<(String, String)> {
    for (k, v) in &mut headers {
        if k.eq_ignore_ascii_case(name) {
            *v = value.to_owned();
        }
    }
    headers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_messages_get_their_documented_outcome_and_good_events_go_on() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    steps::create_table(&test).await;
    let fx = SubscriberFixture::shared().await;
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default().without_notify());
    let inbox = Inbox::new(&outbox, fx.durable.clone()).unwrap();
    let step = |aggregate: &str, n: i64| fx.message(&StepRecorded { step: n }, aggregate, n as u64);

    // Good events of A before and after the foreign ones.
    let a1 = step("A", 1);
    fx.publish(&a1).await;
    fx.publish(&step("A", 2)).await;

    // 1. No CloudEvents headers at all, on a subject the filter captures.
    fx.publish_raw(&format!("{}.order.plain", fx.prefix), vec![], b"hello")
        .await;
    // 2. A known event of aggregate B, text that is not JSON, labelled text.
    let b1 = step("B", 1);
    let text = with_header(headers_of(&b1), wire::CONTENT_TYPE, "text/plain");
    fx.publish_raw(&b1.subject, text, b"step one").await;
    // 3. 512 KiB of JSON that does not fit the event, for aggregate C.
    let c1 = step("C", 1);
    let huge = format!(r#"{{"step": "{}"}}"#, "x".repeat(512 * 1024)).into_bytes();
    fx.publish_raw(&c1.subject, headers_of(&c1), &huge).await;
    // 4. A version of the event this registry does not know, aggregate D.
    let d1 = step("D", 1);
    let future = with_header(headers_of(&d1), wire::EVENT_VERSION, "99");
    fx.publish_raw(&d1.subject, future, d1.payload.as_bytes())
        .await;
    // 5. An event name nobody registered, for aggregate A.
    let mut unknown = step("A", 50);
    unknown.event_name = "foreign.never.heard.of".into();
    fx.publish(&unknown).await;
    // 6. A valid envelope of A with a forged aggregate sequence.
    fx.publish(&step("A", 1_000)).await;
    // 7. A copy of A/1's id with another payload, past JetStream's dedup.
    let copy: Vec<(String, String)> = headers_of(&a1)
        .into_iter()
        .filter(|(k, _)| k != wire::NATS_MSG_ID)
        .collect();
    fx.publish_raw(&a1.subject, copy, br#"{"step": 666}"#).await;
    // 8. Another producer's message of E reusing A/1's Nats-Msg-Id.
    let e1 = step("E", 1);
    let reused = with_header(headers_of(&e1), wire::NATS_MSG_ID, &a1.id.to_string());
    let mut stream = fx.jetstream.get_stream(&fx.stream).await.unwrap();
    let stored_before = stream.info().await.unwrap().state.messages;
    let mut map = async_nats::HeaderMap::new();
    for (name, value) in reused {
        map.append(name.as_str(), value.as_str());
    }
    let ack = fx
        .jetstream
        .publish_with_headers(
            e1.subject.clone(),
            map,
            e1.payload.as_bytes().to_vec().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(ack.duplicate, "JetStream drops a reused Nats-Msg-Id");
    assert_eq!(
        stream.info().await.unwrap().state.messages,
        stored_before,
        "nothing stored for it"
    );
    // The good event after all of them.
    fx.publish(&step("A", 3)).await;

    // Each effect's position: the order they were applied in.
    let position = Arc::new(AtomicI64::new(0));
    let running = fx
        .subscriber()
        .on(
            inbox.handler_boxed(move |event: StepRecorded, delivery, uow| {
                let at = position.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move {
                    steps::record(uow, delivery.aggregate_id(), event.step, at).await
                })
            }),
        )
        .start()
        .await;

    // A's events in stream order, the forged sequence among them, each once.
    eventually("A applied", WAIT, || async {
        applied(&test, "A").await == [1, 2, 1_000, 3]
    })
    .await;
    for aggregate in ["B", "C", "D", "E"] {
        assert!(applied(&test, aggregate).await.is_empty(), "{aggregate}");
    }

    // Dead letters, each with its kind.
    let dead = fx.dead_letters(4).await;
    let mut kinds: Vec<&str> = dead
        .iter()
        .map(|message| header(message, dead_lettering::KIND).unwrap_or("none"))
        .collect();
    kinds.sort_unstable(); // aggregates run in parallel
    assert_eq!(
        kinds,
        [
            "invalid-envelope",
            "invalid-envelope",
            "malformed",
            "unknown-version"
        ]
    );
    // The aggregates whose events may be their own of another shape are
    // held, visibly.
    eventually("C and D held", WAIT, || async {
        let mut held: Vec<String> = inbox
            .holds()
            .await
            .unwrap()
            .into_iter()
            .map(|hold| hold.aggregate_id)
            .collect();
        held.sort();
        held == ["C", "D"]
    })
    .await;
    // Nothing left unacknowledged: no aggregate stuck out of sight.
    fx.settled(WAIT).await;
    fx.settle_and_shut_down(running).await;
    fx.delete().await;
}
