//! The kit through the real processor: drains, retries on the test clock,
//! dead messages, and each fault the `faults` module documents.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::{Order, OrderAmended, OrderPlaced};
use txoutbox_core::RetryPolicy;
use txoutbox_core::processor::Processor;
use txoutbox_core::publisher::PublishErrorKind;
use txoutbox_core::store::DeadSelector;
use txoutbox_core::store::OutboxAdmin;
use txoutbox_testing::faults::{FaultyPublisher, FaultyStore};
use txoutbox_testing::{MemoryPublisher, MemoryStore, RowStatus, TestOutbox};

#[tokio::test]
async fn a_drain_publishes_every_aggregate_in_order() {
    let outbox = TestOutbox::new();
    for k in 0..5 {
        let mut order = Order::place(&format!("o-{k}"), 100).unwrap();
        order.amend(200).unwrap();
        order.amend(300).unwrap();
        outbox.save(&mut order).unwrap();
    }
    let published = outbox.drain().await.unwrap();
    assert_eq!(published.len(), 15);
    outbox.publisher().assert_in_order();
    assert_eq!(outbox.publisher().events::<OrderPlaced>().len(), 5);
    let amended = outbox.publisher().events::<OrderAmended>();
    assert_eq!(amended.iter().filter(|e| e.cents == 300).count(), 5);
    assert!(outbox.store().pending().is_empty());
    assert!(outbox.drain().await.unwrap().is_empty(), "nothing left");
}

#[tokio::test]
async fn a_rejected_message_backs_off_on_the_test_clock_and_holds_its_aggregate() {
    let publisher = FaultyPublisher::new(MemoryPublisher::new());
    let outbox = TestOutbox::with_publisher(publisher.clone()).retry(RetryPolicy::new(
        5,
        Duration::from_secs(60),
        Duration::from_secs(60),
    ));
    let mut a = Order::place("a", 1).unwrap();
    a.amend(2).unwrap();
    outbox.save(&mut a).unwrap();
    outbox.save(&mut Order::place("b", 1).unwrap()).unwrap();
    publisher.reject(
        |m| m.aggregate_id == "a" && m.sequence == 1,
        PublishErrorKind::Rejected,
    );

    let first = outbox.drain().await.unwrap();
    assert_eq!(first.len(), 1, "b goes on: {first:?}");
    let held = outbox.store().messages();
    let a1 = held.iter().find(|m| m.message.aggregate_id == "a").unwrap();
    assert_eq!((a1.status, a1.attempts), (RowStatus::Pending, 1));
    assert!(a1.last_error.as_deref().unwrap().contains("injected"));

    publisher.heal();
    assert!(
        outbox.drain().await.unwrap().is_empty(),
        "a#1 still backs off (60 s)"
    );
    outbox.clock().advance(Duration::from_secs(61));
    let retried = outbox.drain().await.unwrap();
    assert_eq!(
        retried.iter().map(|m| m.sequence).collect::<Vec<_>>(),
        [1, 2],
        "after the backoff, a#1 then a#2"
    );
    publisher.inner().assert_in_order();
}

#[tokio::test]
async fn a_permanent_rejection_is_dead_until_requeued() {
    let publisher = FaultyPublisher::new(MemoryPublisher::new());
    let outbox = TestOutbox::with_publisher(publisher.clone());
    let mut a = Order::place("a", 1).unwrap();
    a.amend(2).unwrap();
    outbox.save(&mut a).unwrap();
    publisher.reject(|m| m.sequence == 1, PublishErrorKind::Permanent);
    assert!(outbox.drain().await.unwrap().is_empty());
    assert_eq!(outbox.store().dead().len(), 1);
    assert_eq!(
        outbox.store().pending().len(),
        1,
        "a#2 waits behind the dead a#1"
    );

    publisher.heal();
    let requeued = outbox
        .store()
        .requeue_dead(DeadSelector::All)
        .await
        .unwrap();
    assert_eq!(requeued, 1);
    assert_eq!(outbox.drain().await.unwrap().len(), 2);
    publisher.inner().assert_in_order();
}

#[tokio::test]
async fn a_broker_outage_spends_no_attempt_and_loses_nothing_while_writes_go_on() {
    let publisher = FaultyPublisher::new(MemoryPublisher::new());
    let outbox = TestOutbox::with_publisher(publisher.clone());
    publisher.unavailable_for(Duration::from_millis(300));
    let writer = {
        let outbox = outbox.clone();
        tokio::spawn(async move {
            let mut order = Order::place("steady", 0).unwrap();
            outbox.save(&mut order).unwrap();
            for cents in 1..=30 {
                order.amend(cents).unwrap();
                outbox.save(&mut order).unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let published = outbox.drain().await.unwrap();
    writer.await.unwrap();
    let rest = outbox.drain().await.unwrap();
    assert_eq!(published.len() + rest.len(), 31, "every write published");
    assert_eq!(publisher.inner().duplicates(), 0);
    publisher.inner().assert_in_order();
    assert!(
        outbox.store().messages().iter().all(|m| m.attempts == 0),
        "no attempt spent"
    );
}

/// A 10-s outage grows the processor's pauses to their maximum (its
/// default `unavailable_backoff`: 100 ms doubling to 5 s); when the
/// connection comes back to a server that cannot store for another 500 ms
/// (a restarted nats-server recovering its streams), publishing resumes
/// within about a second of it being ready, not a long pause later.
#[tokio::test(start_paused = true)]
async fn after_a_long_outage_publishing_resumes_soon_after_the_broker_is_ready() {
    let broker = MemoryPublisher::new();
    let publisher = FaultyPublisher::new(broker.clone());
    let store = MemoryStore::new();
    let mut order = Order::place("after-outage", 0).unwrap();
    store.save(&mut order).unwrap();
    publisher.unavailable_for(Duration::from_secs(10));
    publisher.not_ready_for(Duration::from_millis(10_500));
    let started = tokio::time::Instant::now();
    let processor = Processor::builder(store.clone(), publisher)
        .build()
        .unwrap()
        .spawn();
    while broker.messages().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never published"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = started.elapsed();
    processor.shutdown().await.unwrap();
    assert!(
        took < Duration::from_millis(12_000),
        "published {took:?} after the outage began (ready at 10.5 s)"
    );
    assert!(
        store.messages().iter().all(|m| m.attempts == 0),
        "no attempt spent"
    );
}

#[tokio::test]
async fn a_lost_ack_is_published_again_and_stored_once() {
    let publisher = FaultyPublisher::new(MemoryPublisher::new());
    let outbox = TestOutbox::with_publisher(publisher.clone());
    let mut order = Order::place("o", 1).unwrap();
    order.amend(2).unwrap();
    outbox.save(&mut order).unwrap();
    publisher.lose_acks(1);
    let published = outbox.drain().await.unwrap();
    assert_eq!(published.len(), 2);
    let broker = publisher.inner();
    assert_eq!(broker.messages().len(), 2, "stored once each");
    assert_eq!(broker.duplicates(), 1, "the re-publish was absorbed");
    broker.assert_in_order();
}

#[tokio::test]
async fn failed_completions_are_retried_and_publish_nothing_twice() {
    let store = FaultyStore::new(txoutbox_testing::MemoryStore::new());
    store.fail_completions(3);
    let broker = MemoryPublisher::new();
    let mut order = Order::place("o", 1).unwrap();
    order.amend(2).unwrap();
    store.inner().save(&mut order).unwrap();
    let handle = txoutbox_core::Processor::builder(store.clone(), broker.clone())
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .spawn();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !store.inner().pending().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "not drained");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    handle.shutdown().await.unwrap();
    assert_eq!(store.inner().published().len(), 2);
    assert_eq!(
        broker.duplicates(),
        0,
        "the completion was retried, not the publish"
    );
    broker.assert_in_order();
}

#[tokio::test]
async fn a_save_with_a_stale_version_is_refused() {
    let outbox = TestOutbox::new();
    let mut order = Order::place("o", 1).unwrap();
    outbox.save(&mut order).unwrap();
    let mut stale = Order::place("o", 1).unwrap(); // version 0 again
    let err = outbox.save(&mut stale).unwrap_err();
    assert!(err.to_string().contains("concurrency conflict"), "{err}");
    assert_eq!(
        outbox.store().messages().len(),
        1,
        "nothing of it was written"
    );
}
