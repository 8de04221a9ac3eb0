//! A message whose handler rejects it goes to the dead letters and, with
//! `keep_order`, holds its aggregate: the aggregate's later messages are
//! parked (in the inbox's database, on PostgreSQL, MariaDB and SQLite), not
//! applied past it, also across a subscriber restart, while other
//! aggregates go on; the hold is visible through `Inbox::holds` and lasts
//! until `Inbox::release` retries the dead message (then everything parked
//! is applied in order, each once) or skips it (never applied, recorded as
//! processed).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use txoutbox_core::consumer::Release;
use txoutbox_core::{HandlerError, IntegrationEvent, OutboxMessage};
use txoutbox_nats::subscriber::RunningSubscriber;
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig};
use txoutbox_suite::TestDb;
use txoutbox_suite::steps::{self, applied};
use txoutbox_suite::subscriber::{StartSubscriber, SubscriberFixture, eventually};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "hold.step.recorded")]
struct StepRecorded {
    step: i64,
    poison: bool,
}

const WAIT: Duration = Duration::from_secs(20);

/// What the handler sees: whether poison is accepted yet, and a counter
/// giving each applied effect its position.
#[derive(Clone, Default)]
struct World {
    fixed: Arc<AtomicBool>,
    position: Arc<AtomicI64>,
}

async fn setup(test: &TestDb) -> (SubscriberFixture, Inbox) {
    steps::create_table(test).await;
    let fixture = SubscriberFixture::shared().await;
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default().without_notify());
    let inbox = Inbox::new(&outbox, fixture.durable.clone()).unwrap();
    (fixture, inbox)
}

/// A subscriber whose inbox handler rejects poison until the world is fixed.
async fn subscribe(fixture: &SubscriberFixture, inbox: &Inbox, world: &World) -> RunningSubscriber {
    let world = world.clone();
    fixture
        .subscriber()
        .on(
            inbox.handler_boxed(move |event: StepRecorded, delivery, uow| {
                let world = world.clone();
                Box::pin(async move {
                    if event.poison && !world.fixed.load(Ordering::SeqCst) {
                        return Err(HandlerError::permanent("poison step"));
                    }
                    let position = world.position.fetch_add(1, Ordering::SeqCst);
                    steps::record(uow, delivery.aggregate_id(), event.step, position).await
                })
            }),
        )
        .start()
        .await
}

async fn publish(
    fixture: &SubscriberFixture,
    aggregate: &str,
    step: i64,
    poison: bool,
) -> OutboxMessage {
    let message = fixture.message(&StepRecorded { step, poison }, aggregate, step as u64);
    fixture.publish(&message).await;
    message
}

/// Publishes `A/1` (a good step), then `A/2`, a poison step: returns `A/2`.
async fn publish_good_then_poison(fixture: &SubscriberFixture) -> OutboxMessage {
    publish(fixture, "A", 1, false).await;
    publish(fixture, "A", 2, true).await
}

async fn wait_applied(test: &TestDb, aggregate: &str, expected: &[i64]) {
    eventually(
        &format!("{aggregate} applied {expected:?}"),
        WAIT,
        || async { applied(test, aggregate).await == expected },
    )
    .await;
}

/// `(aggregate id, waiting, released)` of every hold.
async fn holds(inbox: &Inbox) -> Vec<(String, u64, Option<Release>)> {
    inbox
        .holds()
        .await
        .unwrap()
        .into_iter()
        .map(|hold| (hold.aggregate_id, hold.waiting, hold.release))
        .collect()
}

async fn wait_holds(inbox: &Inbox, expected: &[(&str, u64)]) {
    let expected: Vec<(String, u64, Option<Release>)> = expected
        .iter()
        .map(|(id, waiting)| ((*id).to_owned(), *waiting, None))
        .collect();
    eventually(&format!("holds {expected:?}"), WAIT, || async {
        holds(inbox).await == expected
    })
    .await;
}

async fn a_dead_message_holds_its_aggregate_until_released(test: TestDb) {
    let (fixture, inbox) = setup(&test).await;
    let world = World::default();
    let subscriber = subscribe(&fixture, &inbox, &world).await;
    let dead = publish_good_then_poison(&fixture).await;
    for step in 3..=4 {
        publish(&fixture, "A", step, false).await;
    }
    for step in 1..=3 {
        publish(&fixture, "B", step, false).await;
    }

    // B flows; A stops at the dead message, visibly, with 3 and 4 parked.
    wait_applied(&test, "B", &[1, 2, 3]).await;
    wait_holds(&inbox, &[("A", 2)]).await;
    assert_eq!(applied(&test, "A").await, [1]);
    let hold = inbox.holds().await.unwrap().remove(0);
    assert_eq!(hold.message_id, dead.id);
    assert_eq!(hold.event_name, "hold.step.recorded");
    assert!(hold.reason.contains("poison step"), "{}", hold.reason);
    assert_eq!(
        fixture.dead_letters(1).await.len(),
        1,
        "still dead-lettered"
    );
    fixture.settled(WAIT).await; // parked messages are acknowledged

    // Later traffic parks too, across a restart of the subscriber.
    publish(&fixture, "A", 5, false).await;
    wait_holds(&inbox, &[("A", 3)]).await;
    subscriber.shutdown().await.unwrap();
    let subscriber = subscribe(&fixture, &inbox, &world).await;
    publish(&fixture, "A", 6, false).await;
    publish(&fixture, "B", 4, false).await;
    wait_applied(&test, "B", &[1, 2, 3, 4]).await;
    wait_holds(&inbox, &[("A", 4)]).await;
    assert_eq!(applied(&test, "A").await, [1]);

    // Fixed and released: everything parked is applied, in order, once.
    world.fixed.store(true, Ordering::SeqCst);
    assert!(inbox.release("order", "A", Release::Retry).await.unwrap());
    wait_applied(&test, "A", &[1, 2, 3, 4, 5, 6]).await;
    wait_holds(&inbox, &[]).await;
    publish(&fixture, "A", 7, false).await;
    wait_applied(&test, "A", &[1, 2, 3, 4, 5, 6, 7]).await;
    assert!(!inbox.release("order", "A", Release::Retry).await.unwrap());
    subscriber.shutdown().await.unwrap();
    fixture.delete().await;
}

async fn a_skipped_message_is_never_applied(test: TestDb) {
    let (fixture, inbox) = setup(&test).await;
    let world = World::default();
    let subscriber = subscribe(&fixture, &inbox, &world).await;
    let dead = publish_good_then_poison(&fixture).await;
    publish(&fixture, "A", 3, false).await;
    wait_holds(&inbox, &[("A", 1)]).await;

    // Retried while still broken: held again behind it, release cleared.
    assert!(inbox.release("order", "A", Release::Retry).await.unwrap());
    eventually("the retried release to fail again", WAIT, || async {
        holds(&inbox).await == [("A".to_owned(), 1, None)]
    })
    .await;
    assert_eq!(applied(&test, "A").await, [1]);

    // Skipped: 3 is applied, 2 never, and 2 counts as processed.
    assert!(inbox.release("order", "A", Release::Skip).await.unwrap());
    wait_applied(&test, "A", &[1, 3]).await;
    wait_holds(&inbox, &[]).await;
    assert!(inbox.contains(dead.id).await.unwrap());
    fixture.publish(&dead).await; // a redelivery of the skipped message
    publish(&fixture, "A", 4, false).await;
    wait_applied(&test, "A", &[1, 3, 4]).await;
    subscriber.shutdown().await.unwrap();
    fixture.delete().await;
}

txoutbox_suite::each_backend!(
    a_dead_message_holds_its_aggregate_until_released,
    a_skipped_message_is_never_applied,
);
