//! Failure paths of the typed subscriber that used to stall, reorder or
//! spend deliveries: a failing aggregate and its backlog (held, not
//! deferred), a backlog larger than the consumer's `max_ack_pending`,
//! messages waiting for a handler slot longer than the ack wait, a message
//! returning from a retry while every slot is busy, and a message whose
//! JetStream metadata cannot be read. Each test has its own streams and
//! durable on the machine's nats-server (see `SubscriberFixture`).
//!
//! Nothing here sleeps to show that something did *not* happen: each test
//! waits for an observable condition (every message handled, the consumer
//! settled, a `+TERM` received) and then checks what was recorded.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use txoutbox_core::{Delivery, HandlerError, IntegrationEvent};
use txoutbox_nats::subscriber::{
    Backoff, DeadLetterPolicy, Subscriber, SubscriberBuildError, SubscriberBuilder,
};
use txoutbox_suite::subscriber::{
    StartSubscriber, SubscriberFixture, assert_consumer_mismatch, eventually,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "sub.fail.step")]
struct Step {
    n: u64,
}

/// One handler call: aggregate, step, delivery count, whether it succeeded,
/// when it started and ended.
#[derive(Debug, Clone)]
struct Call {
    aggregate: String,
    n: u64,
    delivery: u64,
    ok: bool,
    started: Instant,
    ended: Instant,
}

type Calls = Arc<Mutex<Vec<Call>>>;

/// Publishes `Step { n }` as message `n` of aggregate `aggregate`.
async fn publish_step(fx: &SubscriberFixture, aggregate: &str, n: u64) {
    fx.publish(&fx.message(&Step { n }, aggregate, n)).await;
}

/// A handler that records every call in `calls`; `fails(aggregate, n,
/// attempt)` (attempt: 1 for the first call of that message) says whether
/// the call fails with a retryable error; `work(aggregate)` is how long a
/// call takes.
fn handler(
    calls: &Calls,
    fails: impl Fn(&str, u64, u64) -> bool + Send + Sync + 'static,
    work: impl Fn(&str) -> Duration + Send + Sync + 'static,
) -> impl Fn(Step, Delivery) -> futures::future::BoxFuture<'static, Result<(), HandlerError>>
+ Send
+ Sync
+ 'static {
    let calls = Arc::clone(calls);
    let attempts: Arc<Mutex<HashMap<(String, u64), u64>>> = Arc::default();
    let (fails, work) = (Arc::new(fails), Arc::new(work));
    move |step: Step, delivery: Delivery| {
        let (calls, attempts, fails, work) = (
            Arc::clone(&calls),
            Arc::clone(&attempts),
            Arc::clone(&fails),
            Arc::clone(&work),
        );
        Box::pin(async move {
            let aggregate = delivery.aggregate_id().to_owned();
            let started = Instant::now();
            let attempt = {
                let mut attempts = attempts.lock().unwrap();
                let attempt = attempts.entry((aggregate.clone(), step.n)).or_default();
                *attempt += 1;
                *attempt
            };
            let pause = work(&aggregate);
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            let ok = !fails(&aggregate, step.n, attempt);
            calls.lock().unwrap().push(Call {
                aggregate,
                n: step.n,
                delivery: delivery.delivery_count(),
                ok,
                started,
                ended: Instant::now(),
            });
            if ok {
                Ok(())
            } else {
                Err(HandlerError::retry("a shared dependency is down"))
            }
        })
    }
}

/// A [`handler`] whose calls all succeed at once.
fn quick_handler(
    calls: &Calls,
) -> impl Fn(Step, Delivery) -> futures::future::BoxFuture<'static, Result<(), HandlerError>>
+ Send
+ Sync
+ 'static {
    handler(calls, |_, _, _| false, |_| Duration::ZERO)
}

/// Runs a subscriber from `builder` with a [`handler`] (`fails`, `work`)
/// until `expected` calls have succeeded (within `timeout`) and the consumer
/// has settled, then shuts it down; returns every call.
async fn run_until_handled(
    fx: &SubscriberFixture,
    builder: SubscriberBuilder,
    expected: usize,
    timeout: Duration,
    fails: impl Fn(&str, u64, u64) -> bool + Send + Sync + 'static,
    work: impl Fn(&str) -> Duration + Send + Sync + 'static,
) -> Vec<Call> {
    let calls: Calls = Arc::default();
    let running = builder.on(handler(&calls, fails, work)).start().await;
    eventually("every message handled", timeout, || async {
        successes(&calls) == expected
    })
    .await;
    fx.settle_and_shut_down(running).await;
    calls.lock().unwrap().clone()
}

fn successes(calls: &Calls) -> usize {
    calls.lock().unwrap().iter().filter(|c| c.ok).count()
}

/// Per aggregate, the steps that succeeded, in the order they did.
fn handled_in_order(calls: &[Call]) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for call in calls.iter().filter(|c| c.ok) {
        out.entry(call.aggregate.clone()).or_default().push(call.n);
    }
    out
}

/// Per message, the delivery counts of its calls.
fn deliveries(calls: &[Call]) -> BTreeMap<(String, u64), Vec<u64>> {
    let mut out: BTreeMap<(String, u64), Vec<u64>> = BTreeMap::new();
    for call in calls {
        out.entry((call.aggregate.clone(), call.n))
            .or_default()
            .push(call.delivery);
    }
    out
}

async fn dead_letter_count(fx: &SubscriberFixture) -> u64 {
    let mut dlq = fx.jetstream.get_stream(&fx.dead_letters).await.unwrap();
    dlq.info().await.unwrap().state.messages
}

// ------------------------------------------------------------- item 9

/// A failing message's aggregate waits for it in memory: the messages
/// behind it are not nakked ("deferred"), so they spend no delivery, and
/// each gets its own `max_deliver` real attempts. Here the head fails three
/// times and every later message of its aggregate fails once on its first
/// real attempt: with deferral (the old behaviour) each of them spent its
/// deliveries waiting and was dead-lettered after one real attempt. Another
/// aggregate goes on meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_aggregate_is_held_without_spending_deliveries() {
    let fx = SubscriberFixture::shared().await;
    const STEPS: u64 = 8;
    let mut b = 0;
    for n in 1..=STEPS {
        publish_step(&fx, "a", n).await;
        if n % 2 == 0 && b < 3 {
            b += 1;
            publish_step(&fx, "b", b).await;
        }
    }
    let calls = run_until_handled(
        &fx,
        fx.subscriber().unordered().max_in_flight(4).max_deliver(4),
        (STEPS + 3) as usize,
        Duration::from_secs(15),
        |aggregate, n, attempt| aggregate == "a" && (attempt == 1 || (n == 1 && attempt <= 3)),
        |_| Duration::ZERO,
    )
    .await;

    let order = handled_in_order(&calls);
    assert_eq!(order["a"], (1..=STEPS).collect::<Vec<_>>(), "{calls:#?}");
    assert_eq!(order["b"], [1, 2, 3]);
    let deliveries = deliveries(&calls);
    assert_eq!(deliveries[&("a".to_owned(), 1)], [1, 2, 3, 4]);
    for n in 2..=STEPS {
        assert_eq!(
            deliveries[&("a".to_owned(), n)],
            [1, 2],
            "a/{n}: its first real attempt was its first delivery: {calls:#?}"
        );
    }
    let a1_done = calls
        .iter()
        .find(|c| c.aggregate == "a" && c.n == 1 && c.ok)
        .unwrap()
        .ended;
    assert!(
        calls
            .iter()
            .filter(|c| c.aggregate == "b")
            .all(|c| c.ended < a1_done),
        "the other aggregate was not held up by the failing one"
    );
    assert_eq!(dead_letter_count(&fx).await, 0);
    fx.delete().await;
}

/// A backlog larger than the consumer's `max_ack_pending` behind a failing
/// message: what the subscriber holds never exceeds the server's window
/// (the server stops delivering), the failing message still comes back
/// while the window is full, and the held ones are kept alive past the ack
/// wait without a redelivery; then the backlog drains in order, each
/// message on its first delivery. The consumer carries the setting, and a
/// subscriber with another value is refused like any other mismatch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_beyond_max_ack_pending_waits_in_the_window() {
    let fx = SubscriberFixture::shared().await;
    const A: u64 = 20;
    const B: u64 = 10;
    for n in 1..=A {
        publish_step(&fx, "a", n).await;
    }
    for n in 1..=B {
        publish_step(&fx, "b", n).await;
    }
    let calls: Calls = Arc::default();
    let builder = || {
        fx.subscriber()
            .unordered()
            .ack_wait(Duration::from_secs(1))
            .max_in_flight(2)
            .max_ack_pending(8)
            .backoff(Backoff::exponential(
                Duration::from_millis(300),
                Duration::from_secs(2),
            ))
    };
    let running = builder()
        .on(handler(
            &calls,
            // 0.3 + 0.6 + 1.2 s away: the held messages outlive the ack wait.
            |aggregate, n, attempt| aggregate == "a" && n == 1 && attempt <= 3,
            |_| Duration::from_millis(5),
        ))
        .start()
        .await;
    let most_pending = Arc::new(Mutex::new(0));
    eventually("every message handled", Duration::from_secs(20), || async {
        let pending = fx.consumer_info().await.num_ack_pending;
        let mut most = most_pending.lock().unwrap();
        *most = (*most).max(pending);
        successes(&calls) == (A + B) as usize
    })
    .await;
    fx.settle_and_shut_down(running).await;

    let calls = calls.lock().unwrap().clone();
    let order = handled_in_order(&calls);
    assert_eq!(order["a"], (1..=A).collect::<Vec<_>>());
    assert_eq!(order["b"], (1..=B).collect::<Vec<_>>());
    let deliveries = deliveries(&calls);
    assert_eq!(deliveries[&("a".to_owned(), 1)], [1, 2, 3, 4]);
    for ((aggregate, n), counts) in &deliveries {
        if (aggregate.as_str(), *n) != ("a", 1) {
            assert_eq!(counts, &[1], "{aggregate}/{n} was delivered once");
        }
    }
    let most = *most_pending.lock().unwrap();
    assert_eq!(
        most, 8,
        "the window filled (the failing message and the seven behind it) and held"
    );
    let info = fx.consumer_info().await;
    assert_eq!(info.config.max_ack_pending, 8);

    // The same subscriber with another `max_ack_pending`: refused.
    let refused = async |max_ack_pending| {
        builder()
            .max_ack_pending(max_ack_pending)
            .on(quick_handler(&Calls::default()))
            .build()
            .await
            .unwrap_err()
    };
    let mismatch = refused(9).await;
    assert_consumer_mismatch(&mismatch, "max_ack_pending");
    assert!(
        mismatch.to_string().contains("max_ack_pending = 8"),
        "{mismatch}"
    );
    let too_small = refused(2).await;
    assert!(
        matches!(too_small, SubscriberBuildError::InvalidConfig(ref why) if why.contains("max_ack_pending")),
        "{too_small}"
    );

    // A consumer created without the setting (by an earlier version) has
    // the server's default, 1,000, which is the builder's default too.
    let legacy = format!("{}_legacy", fx.durable);
    fx.jetstream
        .get_stream(&fx.stream)
        .await
        .unwrap()
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            durable_name: Some(legacy.clone()),
            ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(2),
            max_deliver: 5,
            ..Default::default()
        })
        .await
        .unwrap();
    Subscriber::builder(fx.jetstream.clone(), legacy)
        .unordered()
        .stream(&fx.stream)
        .ack_wait(Duration::from_secs(2))
        // The fixture's dead-letter stream captures the fixture's durable only.
        .dead_letter(DeadLetterPolicy::terminate())
        .on(quick_handler(&Calls::default()))
        .build()
        .await
        .expect("the default max_ack_pending verifies against the server's");
    fx.delete().await;
}

// ------------------------------------------------------------- item 10

/// Six aggregates, two handler slots, handlers longer than the ack wait:
/// four messages wait for a slot, some of them for three ack waits. The
/// subscriber has read them all from the server and keeps every one alive
/// with progress acks, so none is redelivered or handled twice (the client
/// used to keep those it had received but not yet taken without progress
/// acks while it waited for a slot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_waiting_for_a_handler_slot_are_kept_alive() {
    let fx = SubscriberFixture::shared().await;
    const AGGREGATES: u64 = 6;
    for aggregate in 0..AGGREGATES {
        publish_step(&fx, &format!("g{aggregate}"), 1).await;
    }
    let calls = run_until_handled(
        &fx,
        fx.subscriber()
            .unordered()
            .ack_wait(Duration::from_secs(1))
            .max_in_flight(2),
        AGGREGATES as usize,
        Duration::from_secs(15),
        |_, _, _| false,
        |_| Duration::from_millis(1200),
    )
    .await;

    assert_eq!(
        calls.len(),
        AGGREGATES as usize,
        "none ran twice: {calls:#?}"
    );
    assert!(calls.iter().all(|c| c.delivery == 1), "{calls:#?}");
    fx.delete().await;
}

/// A message that failed comes back while both handler slots are busy for
/// far longer than its backoff plus the ack wait: its aggregate waits for
/// it (it is back in this process, waiting for a slot) instead of moving
/// on, the message behind it waits in memory without a delivery spent, and
/// both run in order once a slot frees.
///
/// Why a lane can no longer move on "under back-pressure": the subscriber
/// reads every message the server sends as soon as it arrives (it never
/// stops reading to wait for a slot; what it holds is bounded by the
/// consumer's `max_ack_pending`), and a message that is back is in its
/// lane, where it can only wait for a slot, never be given up. A lane gives
/// a message up only when it has not come back at all within its delay
/// plus the ack wait (plus a margin): then it went to another process bound
/// to the durable, which this process cannot wait for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returning_message_waits_for_a_slot_and_keeps_its_place() {
    let fx = SubscriberFixture::shared().await;
    publish_step(&fx, "a", 1).await;
    publish_step(&fx, "a", 2).await;
    publish_step(&fx, "b", 1).await;
    publish_step(&fx, "c", 1).await;
    let calls = run_until_handled(
        &fx,
        fx.subscriber()
            .unordered()
            .ack_wait(Duration::from_secs(1))
            .max_in_flight(2),
        4,
        Duration::from_secs(15),
        |aggregate, n, attempt| (aggregate, n, attempt) == ("a", 1, 1),
        |aggregate| {
            if aggregate == "a" {
                Duration::ZERO
            } else {
                // Far longer than a/1's 100 ms backoff plus its 1 s ack wait.
                Duration::from_millis(2500)
            }
        },
    )
    .await;
    let a: Vec<(u64, u64, bool)> = calls
        .iter()
        .filter(|c| c.aggregate == "a")
        .map(|c| (c.n, c.delivery, c.ok))
        .collect();
    assert_eq!(
        a,
        [(1, 1, false), (1, 2, true), (2, 1, true)],
        "a/1 failed, came back and ran before a/2, which ran once: {calls:#?}"
    );
    let slow_started = calls
        .iter()
        .filter(|c| c.aggregate != "a")
        .map(|c| c.started)
        .min()
        .unwrap();
    let a2 = calls
        .iter()
        .find(|c| c.aggregate == "a" && c.n == 2)
        .unwrap();
    assert!(
        a2.started - slow_started > Duration::from_millis(1500),
        "a/2 waited for its slot behind a/1, past a/1's backoff and ack wait"
    );
    fx.delete().await;
}

/// A message whose JetStream metadata cannot be read (its reply subject is
/// not a `$JS.ACK` subject) is terminated, not left hanging until its ack
/// wait: here one is slipped into the subscriber's pull inbox (seen by
/// listening on the consumer's pull-request subject), with a reply subject
/// the test listens on for the `+TERM`. One without a reply subject cannot
/// be answered at all; it is logged and counted, and the subscriber goes on
/// to handle the next real message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_without_readable_metadata_is_terminated() {
    let fx = SubscriberFixture::shared().await;
    let client = async_nats::connect(txoutbox_suite::jetstream::nats_url())
        .await
        .unwrap();
    let mut pulls = client
        .subscribe(format!(
            "$JS.API.CONSUMER.MSG.NEXT.{}.{}",
            fx.stream, fx.durable
        ))
        .await
        .unwrap();
    let answer = format!("bogus.reply.{}", fx.durable);
    let mut answers = client.subscribe(answer.clone()).await.unwrap();
    client.flush().await.unwrap();

    let calls: Calls = Arc::default();
    let running = fx
        .subscriber()
        .unordered()
        .on(quick_handler(&calls))
        .start()
        .await;
    let pull = tokio::time::timeout(Duration::from_secs(5), pulls.next())
        .await
        .expect("the subscriber pulls")
        .unwrap();
    let inbox = pull.reply.expect("a pull request has a reply inbox");
    client
        .publish(inbox.clone(), "no reply subject at all".into())
        .await
        .unwrap();
    client
        .publish_with_reply(inbox, answer, "not a JetStream delivery".into())
        .await
        .unwrap();
    let settled = tokio::time::timeout(Duration::from_secs(5), answers.next())
        .await
        .expect("the message was answered")
        .unwrap();
    assert_eq!(&settled.payload[..], b"+TERM");

    publish_step(&fx, "a", 1).await;
    eventually("the next real message", Duration::from_secs(5), || async {
        successes(&calls) == 1
    })
    .await;
    assert!(!running.is_finished());
    fx.settle_and_shut_down(running).await;
    fx.delete().await;
}
