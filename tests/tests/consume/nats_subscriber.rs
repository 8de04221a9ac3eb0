//! Typed subscribers on the machine's nats-server: dispatch by type and
//! version with upcasts, retries with growing delays, dead letters with
//! reasons (handler failures and garbage), per-aggregate order under
//! concurrency, shutdown, consumer verification and metrics (tracing: in
//! `nats_subscriber_tracing.rs`, a process of its own).
//! Each test has its own streams and durable (see `SubscriberFixture`).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sample_events::{OrderPlaced, OrderPlacedV1, OrderPlacedV2};
use serde::{Deserialize, Serialize};
use txoutbox_core::{Delivery, HandlerError, IntegrationEvent, wire};
use txoutbox_nats::subscriber::{
    DeadLetterPolicy, RunningSubscriber, SubscriberBuildError, SubscriberBuilder, dead_lettering,
};
use txoutbox_suite::subscriber::{
    StartSubscriber, SubscriberFixture, assert_consumer_mismatch, eventually, header,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "sub.order.paid")]
struct Paid {
    order_id: String,
    cents: u64,
}

/// Registered (the inventory knows it) but handled by no test subscriber.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "sub.order.shipped")]
struct Shipped {
    order_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "sub.step")]
struct Step {
    n: u64,
}

type Log<T> = Arc<Mutex<Vec<T>>>;

fn log<T>() -> Log<T> {
    Arc::new(Mutex::new(Vec::new()))
}

fn len<T>(log: &Log<T>) -> usize {
    log.lock().unwrap().len()
}

/// Records every event with its delivery.
fn recorder<E: Send + 'static>(
    log: &Log<(E, Delivery)>,
) -> impl Fn(E, Delivery) -> std::future::Ready<Result<(), HandlerError>> + Send + Sync + 'static {
    let log = Arc::clone(log);
    move |event, delivery| {
        log.lock().unwrap().push((event, delivery));
        std::future::ready(Ok(()))
    }
}

/// Publishes `Step { n }` as message `sequence` of aggregate `aggregate`.
async fn publish_step(fx: &SubscriberFixture, n: u64, aggregate: &str, sequence: u64) {
    fx.publish(&fx.message(&Step { n }, aggregate, sequence))
        .await;
}

/// A fixture on the shared server holding `steps`: `Step { n }` as message
/// `sequence` of `aggregate` for each `(n, aggregate, sequence)`, in order.
async fn fixture_with_steps(steps: &[(u64, &str, u64)]) -> SubscriberFixture {
    let fx = SubscriberFixture::shared().await;
    for &(n, aggregate, sequence) in steps {
        publish_step(&fx, n, aggregate, sequence).await;
    }
    fx
}

/// A `Step` handler that calls `body` with each step, its delivery and a
/// handle on `log` (for the future `body` returns to record into).
fn logging_handler<T: Send + 'static, Fut>(
    log: &Log<T>,
    body: impl Fn(Step, Delivery, Log<T>) -> Fut + Send + Sync + 'static,
) -> impl Fn(Step, Delivery) -> Fut + Send + Sync + 'static
where
    Fut: std::future::Future<Output = Result<(), HandlerError>> + Send + 'static,
{
    let log = Arc::clone(log);
    move |step, delivery| body(step, delivery, Arc::clone(&log))
}

/// Shuts `running` down, which must take under 2 s: the handler in flight
/// is waited for only up to the shutdown deadline.
async fn shut_down_promptly(running: RunningSubscriber) {
    let stopping = Instant::now();
    running.shutdown().await.unwrap();
    assert!(
        stopping.elapsed() < Duration::from_secs(2),
        "{:?}",
        stopping.elapsed()
    );
}

/// Records a step's number with its delivery count.
fn record_step(seen: &Log<(u64, u64)>, step: &Step, delivery: &Delivery) {
    seen.lock()
        .unwrap()
        .push((step.n, delivery.delivery_count()));
}

// ------------------------------------------------------------- dispatch

/// One consumer, several event types, three versions of one event: each
/// handler gets its type, older versions upcast, and the delivery context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatches_by_type_and_version_with_upcasts() {
    let fx = SubscriberFixture::shared().await;
    let v1 = fx.message(
        &OrderPlacedV1 {
            order_id: "o-1".into(),
            total: 12,
        },
        "o-1",
        1,
    );
    let v2 = fx.message(
        &OrderPlacedV2 {
            order_id: "o-2".into(),
            total_cents: 1250,
        },
        "o-2",
        1,
    );
    let v3 = fx.message(
        &OrderPlaced {
            order_id: "o-3".into(),
            total_cents: 99,
            currency: "CHF".into(),
        },
        "o-3",
        1,
    );
    let paid = fx.message(
        &Paid {
            order_id: "o-1".into(),
            cents: 1200,
        },
        "o-1",
        2,
    );
    for message in [&v1, &v2, &v3, &paid] {
        fx.publish(message).await;
    }

    let (placed, payments) = (log(), log());
    let running = fx
        .subscriber()
        .unordered()
        .on(recorder::<OrderPlaced>(&placed))
        .on(recorder::<Paid>(&payments))
        .start()
        .await;
    eventually("all four handled", Duration::from_secs(10), || async {
        len(&placed) == 3 && len(&payments) == 1
    })
    .await;
    fx.settle_and_shut_down(running).await;

    let mut placed = placed.lock().unwrap().clone();
    placed.sort_by_key(|(_, delivery)| delivery.stream_sequence());
    let events: Vec<_> = placed.iter().map(|(event, _)| event.clone()).collect();
    assert_eq!(
        events,
        [
            OrderPlaced {
                order_id: "o-1".into(),
                total_cents: 1200,
                currency: "EUR".into()
            },
            OrderPlaced {
                order_id: "o-2".into(),
                total_cents: 1250,
                currency: "EUR".into()
            },
            OrderPlaced {
                order_id: "o-3".into(),
                total_cents: 99,
                currency: "CHF".into()
            },
        ],
        "v1 and v2 upcast to v3"
    );
    let versions: Vec<u32> = placed.iter().map(|(_, d)| d.event_version()).collect();
    assert_eq!(
        versions,
        [1, 2, 3],
        "the delivery tells the version as written"
    );
    let (_, first) = &placed[0];
    assert_eq!(first.message_id(), v1.id);
    assert_eq!(first.message(), &txoutbox_suite::canonical(v1.clone()));
    assert_eq!(
        (
            first.aggregate_type(),
            first.aggregate_id(),
            first.sequence()
        ),
        ("order", "o-1", 1)
    );
    assert_eq!(first.correlation_id(), "corr-1");
    assert_eq!(
        (first.consumer(), first.stream()),
        (fx.durable.as_str(), fx.stream.as_str())
    );
    assert_eq!((first.stream_sequence(), first.delivery_count()), (1, 1));

    let payments = payments.lock().unwrap().clone();
    assert_eq!(
        payments[0].0,
        Paid {
            order_id: "o-1".into(),
            cents: 1200
        }
    );
    assert_eq!(payments[0].1.stream_sequence(), 4);
    fx.delete().await;
}

// ------------------------------------------------------------- failures

/// A handler that fails twice then succeeds is retried with growing delays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_handler_is_retried_with_growing_delays() {
    let fx = fixture_with_steps(&[(1, "a", 1)]).await;

    let attempts: Log<(u64, Instant)> = log();
    let running = fx
        .subscriber()
        .unordered()
        .backoff(txoutbox_nats::subscriber::Backoff::exponential(
            Duration::from_millis(300),
            Duration::from_secs(5),
        ))
        .on(logging_handler(&attempts, |_, delivery, seen| async move {
            seen.lock()
                .unwrap()
                .push((delivery.delivery_count(), Instant::now()));
            if delivery.delivery_count() < 3 {
                return Err(HandlerError::retry("ledger not ready"));
            }
            Ok(())
        }))
        .start()
        .await;
    eventually("a third attempt", Duration::from_secs(10), || async {
        len(&attempts) == 3
    })
    .await;
    fx.settle_and_shut_down(running).await;

    let attempts = attempts.lock().unwrap().clone();
    let deliveries: Vec<u64> = attempts.iter().map(|(n, _)| *n).collect();
    assert_eq!(deliveries, [1, 2, 3]);
    let first_gap = attempts[1].1 - attempts[0].1;
    let second_gap = attempts[2].1 - attempts[1].1;
    // Delays are jittered into the upper half of each step: [150, 300] ms,
    // then [300, 600] ms.
    assert!(first_gap >= Duration::from_millis(140), "{first_gap:?}");
    assert!(second_gap >= Duration::from_millis(290), "{second_gap:?}");
    assert!(
        second_gap + Duration::from_millis(20) >= first_gap,
        "{first_gap:?} then {second_gap:?}"
    );
    assert_eq!(fx.consumer_info().await.num_redelivered, 0);
    let mut dlq = fx.jetstream.get_stream(&fx.dead_letters).await.unwrap();
    assert_eq!(dlq.info().await.unwrap().state.messages, 0);
    fx.delete().await;
}

/// A handler that always fails ends in the dead-letter subject after
/// `max_deliver` deliveries, with its last error as the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_failing_handler_is_dead_lettered_after_max_deliver() {
    let fx = SubscriberFixture::shared().await;
    let message = fx.message(&Step { n: 1 }, "a", 1);
    fx.publish(&message).await;

    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let running = fx
        .subscriber()
        .unordered()
        .max_deliver(3)
        .on(move |_: Step, delivery: Delivery| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                Err(HandlerError::retry(format!(
                    "ledger unavailable (attempt {})",
                    delivery.delivery_count()
                )))
            }
        })
        .start()
        .await;
    let dead = fx.dead_letters(1).await;
    // Terminated and settled: JetStream delivers it no more, and shutdown
    // waits for any handler still running, so the count below is final.
    fx.settle_and_shut_down(running).await;

    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "exactly max_deliver attempts"
    );
    let dead = &dead[0];
    assert_eq!(header(dead, dead_lettering::KIND), Some("exhausted"));
    let reason = header(dead, dead_lettering::REASON).unwrap();
    assert!(
        reason.contains("all 3 deliveries") && reason.contains("ledger unavailable (attempt 3)"),
        "{reason}"
    );
    assert_eq!(header(dead, dead_lettering::DELIVERIES), Some("3"));
    assert_eq!(
        header(dead, dead_lettering::CONSUMER),
        Some(fx.durable.as_str())
    );
    assert_eq!(
        header(dead, dead_lettering::STREAM),
        Some(fx.stream.as_str())
    );
    assert_eq!(header(dead, dead_lettering::STREAM_SEQUENCE), Some("1"));
    assert_eq!(
        header(dead, dead_lettering::SUBJECT),
        Some(message.subject.as_str())
    );
    let id = message.id.to_string();
    assert_eq!(
        header(dead, wire::ID),
        Some(id.as_str()),
        "original headers kept"
    );
    assert_eq!(
        &dead.payload[..],
        message.payload.as_bytes(),
        "original body"
    );
    assert_eq!(dead.subject.as_str(), format!("dlq.{}", fx.durable));
    fx.delete().await;
}

/// A permanent error dead-letters at once; a panic (in the handler's
/// future, or before it) is retried like an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_errors_dead_letter_at_once_and_panics_are_retried() {
    let fx = fixture_with_steps(&[(1, "a", 1), (2, "b", 1), (3, "c", 1)]).await;

    let handled: Log<(u64, u64)> = log();
    let handler = logging_handler(&handled, |step, delivery, seen| {
        if step.n == 3 && delivery.delivery_count() == 1 {
            panic!("boom, before the handler's future exists");
        }
        async move {
            record_step(&seen, &step, &delivery);
            match (step.n, delivery.delivery_count()) {
                (1, _) => Err(HandlerError::permanent("order o-1 does not exist")),
                (_, 1) => panic!("boom"),
                _ => Ok(()),
            }
        }
    });
    let running = fx.subscriber().unordered().on(handler).start().await;
    let dead = fx.dead_letters(1).await;
    fx.settle_and_shut_down(running).await;

    assert_eq!(header(&dead[0], dead_lettering::KIND), Some("rejected"));
    assert_eq!(
        header(&dead[0], dead_lettering::REASON),
        Some("order o-1 does not exist")
    );
    let mut handled = handled.lock().unwrap().clone();
    handled.sort_unstable();
    assert_eq!(
        handled,
        [(1, 1), (2, 1), (2, 2), (3, 2)],
        "the permanent failure ran once, both panics were retried"
    );
    fx.delete().await;
}

// ------------------------------------------------------------- garbage

/// Bytes that are not JSON, an unknown event, a known event of the wrong
/// shape, an event nobody handles: each is dead-lettered with its reason,
/// and the subscriber goes on handling good messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_dead_lettered_and_the_subscriber_keeps_running() {
    snapshotter();
    let fx = SubscriberFixture::shared().await;
    let subject = format!("{}.garbage", fx.prefix);
    // 1. not JSON, no headers at all
    fx.publish_raw(&subject, vec![], b"\xff\xfe not json").await;
    // 2. a valid envelope's headers around a body that is not JSON
    let headers = |message: &txoutbox_core::OutboxMessage| -> Vec<(String, String)> {
        wire::encode(message, "/tests")
            .expect("the message can be published")
            .into_iter()
            .map(|(k, v)| (k.into_owned(), v))
            .collect()
    };
    let broken = fx.message(
        &Paid {
            order_id: "o-0".into(),
            cents: 1,
        },
        "o-0",
        1,
    );
    fx.publish_raw(&subject, headers(&broken), b"{\"order_id\":")
        .await;
    // 3. an event name nobody registered
    let mut unknown = fx.message(
        &Paid {
            order_id: "o-2".into(),
            cents: 1,
        },
        "o-2",
        1,
    );
    unknown.event_name = "sub.never.heard.of".into();
    fx.publish(&unknown).await;
    // 4. a known name, the wrong shape
    fx.publish_raw(
        &broken.subject,
        headers(&fx.message(
            &Paid {
                order_id: "o-3".into(),
                cents: 1,
            },
            "o-3",
            1,
        )),
        br#"{"order": 3}"#,
    )
    .await;
    // 5. a registered event no handler of this subscriber takes
    fx.publish(&fx.message(
        &Shipped {
            order_id: "o-4".into(),
        },
        "o-4",
        1,
    ))
    .await;
    // 6. finally, a good one
    let good = fx.message(
        &Paid {
            order_id: "o-1".into(),
            cents: 1,
        },
        "o-1",
        1,
    );
    fx.publish(&good).await;

    let payments = log();
    let running = fx
        .subscriber()
        .unordered()
        .dead_letter_unhandled()
        .on(recorder::<Paid>(&payments))
        .start()
        .await;
    let dead = fx.dead_letters(5).await;
    eventually("the good message", Duration::from_secs(5), || async {
        len(&payments) == 1
    })
    .await;
    fx.settled(Duration::from_secs(5)).await;
    assert!(!running.is_finished(), "the subscriber is still running");

    let mut by_sequence: BTreeMap<u64, (String, String)> = BTreeMap::new();
    for letter in &dead {
        let sequence = header(letter, dead_lettering::STREAM_SEQUENCE)
            .unwrap()
            .parse()
            .unwrap();
        by_sequence.insert(
            sequence,
            (
                header(letter, dead_lettering::KIND).unwrap().to_owned(),
                header(letter, dead_lettering::REASON).unwrap().to_owned(),
            ),
        );
    }
    let kinds: Vec<&str> = by_sequence.values().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "invalid-envelope",
            "invalid-envelope",
            "unknown-event",
            "malformed",
            "no-handler"
        ]
    );
    let reason = |sequence: u64| by_sequence[&sequence].1.as_str();
    assert!(
        reason(1).contains("header `ce-specversion` is missing"),
        "{}",
        reason(1)
    );
    assert!(
        reason(2).contains("payload is not valid JSON"),
        "{}",
        reason(2)
    );
    assert!(reason(3).contains("sub.never.heard.of"), "{}", reason(3));
    assert!(
        reason(4).contains("cannot decode `sub.order.paid` v1") && reason(4).contains("order_id"),
        "{}",
        reason(4)
    );
    assert!(
        reason(5).contains("no handler") && reason(5).contains("sub.order.shipped"),
        "{}",
        reason(5)
    );
    let garbage = dead
        .iter()
        .find(|letter| header(letter, dead_lettering::STREAM_SEQUENCE) == Some("1"))
        .unwrap();
    assert_eq!(
        &garbage.payload[..],
        b"\xff\xfe not json",
        "the body as it was"
    );

    let counts = handled_counts(&fx.durable);
    assert_eq!(counts.get("dead_lettered"), Some(&5), "{counts:?}");
    assert_eq!(counts.get("handled"), Some(&1), "{counts:?}");
    running.shutdown().await.unwrap();
    fx.delete().await;
}

/// By default, well-formed events nobody handles (a registered type no
/// handler takes, a name nobody registered) are acked and counted, while
/// undecodable ones are still dead-lettered; the handled event after them
/// is handled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unhandled_events_are_acked_and_counted_by_default() {
    snapshotter();
    let fx = SubscriberFixture::shared().await;
    fx.publish(&fx.message(
        &Shipped {
            order_id: "o-1".into(),
        },
        "o-1",
        1,
    ))
    .await;
    let mut unknown = fx.message(
        &Paid {
            order_id: "o-2".into(),
            cents: 1,
        },
        "o-2",
        1,
    );
    unknown.event_name = "sub.never.heard.of".into();
    fx.publish(&unknown).await;
    fx.publish_raw(&format!("{}.x", fx.prefix), vec![], b"junk")
        .await;
    fx.publish(&fx.message(
        &Paid {
            order_id: "o-3".into(),
            cents: 1,
        },
        "o-3",
        1,
    ))
    .await;
    let payments = log();
    let running = fx
        .subscriber()
        .unordered()
        .on(recorder::<Paid>(&payments))
        .start()
        .await;
    let dead = fx.dead_letters(1).await;
    eventually("the handled one", Duration::from_secs(5), || async {
        len(&payments) == 1
    })
    .await;
    fx.settle_and_shut_down(running).await;
    assert_eq!(dead.len(), 1, "only the garbage is dead");
    assert_eq!(
        header(&dead[0], dead_lettering::KIND),
        Some("invalid-envelope")
    );
    let counts = handled_counts(&fx.durable);
    assert_eq!(counts.get("ignored"), Some(&2), "{counts:?}");
    assert_eq!(counts.get("handled"), Some(&1), "{counts:?}");
    fx.delete().await;
}

/// The policy `terminate` drops dead messages without a copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminate_policy_publishes_no_copy() {
    snapshotter();
    let fx = SubscriberFixture::shared().await;
    fx.publish_raw(&format!("{}.x", fx.prefix), vec![], b"junk")
        .await;
    let payments = log();
    let running = fx
        .subscriber()
        .unordered()
        .dead_letter(DeadLetterPolicy::terminate())
        .on(recorder::<Paid>(&payments))
        .start()
        .await;
    fx.settle_and_shut_down(running).await;
    let mut dlq = fx.jetstream.get_stream(&fx.dead_letters).await.unwrap();
    assert_eq!(dlq.info().await.unwrap().state.messages, 0);
    assert_eq!(handled_counts(&fx.durable).get("terminated"), Some(&1));
    fx.delete().await;
}

// ------------------------------------------------------------- order

/// 8 aggregates × 25 steps, 16 in flight, random handler times, and one
/// step failing once: each aggregate's steps are handled in order, and
/// aggregates run in parallel.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_aggregate_is_handled_in_order_with_concurrency() {
    snapshotter();
    let fx = SubscriberFixture::shared().await;
    const AGGREGATES: u64 = 8;
    const STEPS: u64 = 25;
    for n in 1..=STEPS {
        for aggregate in 0..AGGREGATES {
            publish_step(&fx, n, &format!("a{aggregate}"), n).await;
        }
    }

    let handled: Log<(String, u64)> = log();
    let (running_now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (seen, now, peak) = (
        Arc::clone(&handled),
        Arc::clone(&running_now),
        Arc::clone(&most),
    );
    let running = fx
        .subscriber()
        .unordered()
        .max_in_flight(16)
        .on(move |step: Step, delivery: Delivery| {
            let (seen, now, peak) = (Arc::clone(&seen), Arc::clone(&now), Arc::clone(&peak));
            async move {
                let current = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(current, Ordering::SeqCst);
                let jitter = (step.n * 7 + delivery.stream_sequence() * 13) % 4;
                tokio::time::sleep(Duration::from_millis(jitter)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                if delivery.aggregate_id() == "a3" && step.n == 5 && delivery.delivery_count() == 1
                {
                    return Err(HandlerError::retry("transient"));
                }
                seen.lock()
                    .unwrap()
                    .push((delivery.aggregate_id().to_owned(), step.n));
                Ok(())
            }
        })
        .start()
        .await;
    eventually("all steps", Duration::from_secs(20), || async {
        len(&handled) == (AGGREGATES * STEPS) as usize
    })
    .await;
    running.shutdown().await.unwrap();

    let mut per_aggregate: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (aggregate, n) in handled.lock().unwrap().iter() {
        per_aggregate.entry(aggregate.clone()).or_default().push(*n);
    }
    let expected: Vec<u64> = (1..=STEPS).collect();
    for (aggregate, steps) in &per_aggregate {
        assert_eq!(steps, &expected, "aggregate {aggregate}");
    }
    assert_eq!(per_aggregate.len(), AGGREGATES as usize);
    assert!(
        most.load(Ordering::SeqCst) > 1,
        "different aggregates ran in parallel"
    );
    let counts = handled_counts(&fx.durable);
    assert_eq!(counts.get("retried"), Some(&1), "{counts:?}");
    assert_eq!(
        counts.get("deferred"),
        None,
        "later steps of a3 waited in memory for the retried one, not nakked: {counts:?}"
    );
    fx.delete().await;
}

/// A handler that runs longer than the ack wait, a message waiting behind
/// it in its aggregate's lane, and one waiting for a handler slot are all
/// kept alive with progress acks: none is redelivered (more messages
/// waiting for a slot: `nats_subscriber_failure_paths.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_handlers_are_kept_alive_with_progress_acks() {
    let fx = fixture_with_steps(&[(1, "a", 1), (2, "a", 2), (3, "b", 1)]).await;
    let calls: Log<(u64, u64)> = log();
    let running = fx
        .subscriber()
        .unordered()
        .ack_wait(Duration::from_millis(1200))
        .max_in_flight(2)
        .on(logging_handler(&calls, |step, delivery, seen| async move {
            record_step(&seen, &step, &delivery);
            // Well past the ack wait, which is kept long enough that a
            // busy machine's late progress ack is still in time.
            tokio::time::sleep(Duration::from_millis(3000)).await;
            Ok(())
        }))
        .start()
        .await;
    eventually("all handled", Duration::from_secs(20), || async {
        len(&calls) == 3 && fx.consumer_info().await.num_ack_pending == 0
    })
    .await;
    running.shutdown().await.unwrap();
    let mut calls = calls.lock().unwrap().clone();
    calls.sort_unstable();
    assert_eq!(calls, [(1, 1), (2, 1), (3, 1)], "no redelivery");
    assert_eq!(fx.consumer_info().await.num_redelivered, 0);
    fx.delete().await;
}

// ------------------------------------------------------------- shutdown

/// Shutdown lets the running handler finish, hands the waiting messages
/// back, and a new subscriber on the durable handles the rest.
///
/// (nats-server 2.9 may deliver a handed-back message once more, or only
/// after the ack wait, when no pull request is waiting at the moment it is
/// due: so completeness is asserted here, not order or uniqueness.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_the_running_handler_and_hands_back_the_rest() {
    snapshotter();
    let steps: Vec<_> = (1..=6).map(|n| (n, "a", n)).collect();
    let fx = fixture_with_steps(&steps).await;
    let handled: Log<(u64, u64)> = log();
    let started = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&started);
    let running = fx
        .subscriber()
        .unordered()
        .on(logging_handler(&handled, move |step, delivery, seen| {
            let signal = Arc::clone(&signal);
            async move {
                signal.notify_one();
                tokio::time::sleep(Duration::from_millis(400)).await;
                record_step(&seen, &step, &delivery);
                Ok(())
            }
        }))
        .start()
        .await;
    started.notified().await;
    shut_down_promptly(running).await;
    assert_eq!(
        handled.lock().unwrap().clone(),
        [(1, 1)],
        "only the running handler finished"
    );
    let counts = handled_counts(&fx.durable);
    assert_eq!(
        (counts.get("handled"), counts.get("abandoned")),
        (Some(&1), Some(&5)),
        "the five waiting messages were handed back: {counts:?}"
    );

    let rest = log();
    let again = fx
        .subscriber()
        .unordered()
        .on(recorder::<Step>(&rest))
        .start()
        .await;
    eventually("the other five", Duration::from_secs(6), || async {
        let steps: std::collections::BTreeSet<u64> =
            rest.lock().unwrap().iter().map(|(s, _)| s.n).collect();
        steps == (2..=6).collect()
    })
    .await;
    fx.settle_and_shut_down(again).await;
    assert!(
        rest.lock().unwrap().iter().all(|(s, _)| s.n != 1),
        "the finished one was acked"
    );
    fx.delete().await;
}

/// A handler still running at the shutdown deadline is abandoned and its
/// message nakked: it comes back at once, long before the ack wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_abandons_handlers_at_the_deadline() {
    let fx = fixture_with_steps(&[(1, "a", 1)]).await;
    let started = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&started);
    let running = fx
        .subscriber()
        .unordered()
        .ack_wait(Duration::from_secs(30))
        .shutdown_timeout(Duration::from_millis(300))
        .on(move |_: Step, _: Delivery| {
            let signal = Arc::clone(&signal);
            async move {
                signal.notify_one();
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(())
            }
        })
        .start()
        .await;
    started.notified().await;
    shut_down_promptly(running).await;

    let again = log();
    let next = fx
        .subscriber()
        .unordered()
        .ack_wait(Duration::from_secs(30))
        .on(recorder::<Step>(&again))
        .start()
        .await;
    // Long before the ack wait (its delivery count may read 1 or 2: see
    // the nats-server 2.9 note in the subscriber's shutdown docs).
    eventually(
        "the abandoned message, redelivered",
        Duration::from_secs(3),
        || async { len(&again) == 1 },
    )
    .await;
    next.shutdown().await.unwrap();
    fx.delete().await;
}

// ------------------------------------------------------------- consumer

/// The durable consumer is created once, verified afterwards; a mismatch,
/// a missing stream and two handlers of one event are typed errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_creates_then_verifies_the_consumer() {
    let fx = SubscriberFixture::shared().await;
    let payments = log();
    let first = fx
        .subscriber()
        .unordered()
        .max_deliver(4)
        .on(recorder::<Paid>(&payments))
        .build()
        .await
        .unwrap();
    assert_eq!(first.durable(), fx.durable);
    let info = fx.consumer_info().await;
    assert_eq!(
        (info.config.max_deliver, info.config.ack_wait),
        (4, Duration::from_secs(2))
    );
    fx.subscriber()
        .unordered()
        .max_deliver(4)
        .on(recorder::<Paid>(&payments))
        .build()
        .await
        .expect("the same settings verify");

    // Settings that cannot work, with the payments handler: refused.
    let refused = async |settings: SubscriberBuilder| {
        settings
            .on(recorder::<Paid>(&payments))
            .build()
            .await
            .unwrap_err()
    };
    let mismatch = refused(
        fx.subscriber()
            .unordered()
            .max_deliver(4)
            .ack_wait(Duration::from_secs(3)),
    )
    .await;
    assert_consumer_mismatch(&mismatch, "ack_wait");

    let missing = refused(fx.subscriber().unordered().stream("NO_SUCH_STREAM_EVER")).await;
    assert!(
        matches!(&missing, SubscriberBuildError::StreamMissing { stream } if stream == "NO_SUCH_STREAM_EVER"),
        "{missing}"
    );
    assert!(
        missing
            .to_string()
            .contains("outbox stream ensure --stream NO_SUCH_STREAM_EVER"),
        "names what to run: {missing}"
    );

    // Handlers without an inbox, and no `unordered()`: refused, naming both
    // ways out.
    let no_inbox = fx
        .subscriber()
        .on(recorder::<Paid>(&payments))
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(no_inbox, SubscriberBuildError::NoInbox { .. }),
        "{no_inbox}"
    );
    let text = no_inbox.to_string();
    assert!(
        text.contains("inbox.handler(f)") && text.contains(".unordered()"),
        "{text}"
    );

    let twice = fx
        .subscriber()
        .unordered()
        .on(recorder::<OrderPlacedV1>(&log()))
        .on(recorder::<OrderPlaced>(&log()))
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(
            twice,
            SubscriberBuildError::DuplicateHandler {
                name: "order.placed",
                ..
            }
        ),
        "{twice}"
    );

    let dead_letters_to_itself = DeadLetterPolicy::publish_to(format!("{}.dead", fx.prefix));
    let looping = refused(
        fx.subscriber()
            .unordered()
            .dead_letter(dead_letters_to_itself),
    )
    .await;
    assert!(
        matches!(looping, SubscriberBuildError::InvalidConfig(_)),
        "{looping}"
    );

    // Partitions that cannot work: refused before any consumer is made.
    let four = txoutbox_core::Partitions::new(4).expect("4 partitions");
    let partition_refusals = [
        (
            fx.subscriber()
                .unordered()
                .partitions(&fx.prefix, four, [1, 4]),
            "out of range",
        ),
        (
            fx.subscriber().unordered().partitions(&fx.prefix, four, []),
            "empty",
        ),
        (
            fx.subscriber()
                .unordered()
                .filter_subject(format!("{}.>", fx.prefix))
                .partitions(&fx.prefix, four, [0]),
            "exclude each other",
        ),
    ];
    for (settings, why) in partition_refusals {
        let refusal = refused(settings).await;
        assert!(
            matches!(refusal, SubscriberBuildError::InvalidConfig(ref what) if what.contains(why)),
            "{refusal}"
        );
    }
    fx.delete().await;
}

// ------------------------------------------------------------- metrics

/// `outbox_consumer_handled_total` of `consumer`, by outcome, so far.
fn handled_counts(consumer: &str) -> BTreeMap<String, u64> {
    // A snapshot drains every counter of the process (other tests' too),
    // so all of them are accumulated here.
    static TOTALS: OnceLock<Mutex<BTreeMap<(String, String), u64>>> = OnceLock::new();
    let mut totals = TOTALS.get_or_init(Mutex::default).lock().unwrap();
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        if key.key().name() != txoutbox_nats::subscriber::metrics::HANDLED_TOTAL {
            continue;
        }
        let label = |name: &str| {
            key.key()
                .labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_owned())
                .unwrap_or_default()
        };
        if let metrics_util::debugging::DebugValue::Counter(n) = value {
            *totals
                .entry((label("consumer"), label("outcome")))
                .or_default() += n;
        }
    }
    totals
        .iter()
        .filter(|((owner, _), _)| owner == consumer)
        .map(|((_, outcome), n)| (outcome.clone(), *n))
        .collect()
}

/// The process-wide debugging recorder; tests that read metrics call it
/// first thing, so it is installed before their subscriber records.
fn snapshotter() -> &'static metrics_util::debugging::Snapshotter {
    static SNAPSHOTTER: OnceLock<metrics_util::debugging::Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("the only recorder");
        snapshotter
    })
}
