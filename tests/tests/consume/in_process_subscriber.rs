//! The testing kit's `TestSubscriber` runs a real subscriber, with an
//! inbox on PostgreSQL, MariaDB and SQLite, in process, with no
//! nats-server: the handlers apply once across a redelivery and in each
//! aggregate's order; an event no handler takes is acked and counted; a
//! poison message is dead-lettered `rejected` and holds its aggregate,
//! whose later messages are parked until `Inbox::release` (then applied in
//! order); a retryable failure is retried up to `max_deliver`, then
//! dead-lettered `exhausted`. Plus the builder's checks, and that the
//! harness fails a test when the subscriber is wrong.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use txoutbox_core::consumer::Release;
use txoutbox_core::{
    AggregateRef, HandlerError, IntegrationEvent, MessageContext, OutboxMessage, PendingMessage,
    SubjectPrefix,
};
use txoutbox_nats::subscriber::SubscriberBuilder;
use txoutbox_nats::subscriber::{DeadLetterKind, SubscriberBuildError};
use txoutbox_nats::{IntoJetStream, Subscriber};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig};
use txoutbox_suite::TestDb;
use txoutbox_suite::steps::{self, applied};
use txoutbox_testing::{DeliveryOutcome, Settled, TestSubscriber, TestSubscriberError};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "in_process.step.recorded")]
struct StepRecorded {
    step: i64,
    poison: bool,
}

/// An event the subscriber has no handler for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "in_process.step.noted")]
struct StepNoted {
    note: String,
}

const CONSUMER: &str = "steps";

/// What the handler sees: whether poison is accepted yet, retryable
/// failures still to come, and a counter giving each applied effect its
/// position.
#[derive(Clone, Default)]
struct World {
    fixed: Arc<AtomicBool>,
    failures_left: Arc<AtomicU64>,
    position: Arc<AtomicI64>,
}

/// The service's subscriber, as its own code would build it.
fn steps_subscriber(nats: impl IntoJetStream, inbox: &Inbox, world: &World) -> SubscriberBuilder {
    let world = world.clone();
    Subscriber::builder(nats, CONSUMER)
        .stream("EVENTS")
        .max_deliver(3)
        .on(
            inbox.handler_boxed(move |event: StepRecorded, delivery, uow| {
                let world = world.clone();
                Box::pin(async move {
                    if event.poison && !world.fixed.load(Ordering::SeqCst) {
                        return Err(HandlerError::permanent("poison step"));
                    }
                    let failing = world
                        .failures_left
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok();
                    if failing {
                        return Err(HandlerError::retry("the ledger is busy"));
                    }
                    let position = world.position.fetch_add(1, Ordering::SeqCst);
                    steps::record(uow, delivery.aggregate_id(), event.step, position).await
                })
            }),
        )
}

async fn setup(test: &TestDb) -> Inbox {
    steps::create_table(test).await;
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default().without_notify());
    Inbox::new(&outbox, CONSUMER).unwrap()
}

/// How the harness's subscriber applies its inbox handler's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transactions {
    /// One transaction per message (`inbox_per_message`).
    PerMessage,
    /// In inbox groups (the default): one message per group here.
    Grouped,
}

async fn harness(inbox: &Inbox, world: &World, transactions: Transactions) -> TestSubscriber {
    let nats = TestSubscriber::jetstream().await.unwrap();
    let mut builder = steps_subscriber(nats, inbox, world);
    if transactions == Transactions::PerMessage {
        builder = builder.inbox_per_message();
    }
    TestSubscriber::new(builder).await.unwrap()
}

/// `event` as the outbox publishes it: `sequence` of account `aggregate`.
fn message<E: IntegrationEvent>(event: &E, aggregate: &str, sequence: u64) -> OutboxMessage {
    OutboxMessage::seal(
        PendingMessage::new(event).unwrap(),
        AggregateRef {
            aggregate_type: "account".to_owned(),
            aggregate_id: aggregate.to_owned(),
            sequence,
        },
        &MessageContext::new(),
        &SubjectPrefix::default(),
    )
}

fn step(aggregate: &str, step: i64) -> OutboxMessage {
    message(
        &StepRecorded {
            step,
            poison: false,
        },
        aggregate,
        step as u64,
    )
}

fn poison(aggregate: &str, step: i64) -> OutboxMessage {
    message(&StepRecorded { step, poison: true }, aggregate, step as u64)
}

/// `(aggregate id, sequence, outcome)` of each settled delivery.
fn outcomes(settled: &[Settled]) -> Vec<(String, u64, &'static str)> {
    settled
        .iter()
        .map(|s| (s.aggregate_id.clone(), s.stream_sequence, s.outcome.name()))
        .collect()
}

fn expected(rows: &[(&str, u64, &'static str)]) -> Vec<(String, u64, &'static str)> {
    rows.iter()
        .map(|(id, sequence, outcome)| ((*id).to_owned(), *sequence, *outcome))
        .collect()
}

async fn applied_once_in_order_and_unhandled_acked(test: TestDb) {
    applied_once_in_order_and_unhandled_acked_with(test, Transactions::PerMessage).await;
}

async fn applied_once_in_order_and_unhandled_acked_in_groups(test: TestDb) {
    applied_once_in_order_and_unhandled_acked_with(test, Transactions::Grouped).await;
}

async fn applied_once_in_order_and_unhandled_acked_with(test: TestDb, transactions: Transactions) {
    let inbox = setup(&test).await;
    let subscriber = harness(&inbox, &World::default(), transactions).await;
    let noted = message(&StepNoted { note: "n".into() }, "A", 3);
    let published = [
        step("A", 1),
        step("B", 1),
        step("A", 2),
        noted,
        step("B", 2),
    ];

    let settled = subscriber.deliver_all(&published).await.unwrap();
    assert_eq!(
        outcomes(&settled),
        expected(&[
            ("A", 1, "handled"),
            ("B", 2, "handled"),
            ("A", 3, "handled"),
            ("A", 4, "ignored"),
            ("B", 5, "handled"),
        ])
    );
    assert_eq!(applied(&test, "A").await, [1, 2]);
    assert_eq!(applied(&test, "B").await, [1, 2]);

    // A redelivery (a lost ack): the inbox applied it, nothing runs twice.
    let again = subscriber.deliver_once(&published[0]).await.unwrap();
    assert_eq!(
        (again.outcome, again.delivery),
        (DeliveryOutcome::Duplicate, 2)
    );
    assert!(inbox.contains(published[0].id).await.unwrap());
    assert_eq!(applied(&test, "A").await, [1, 2]);
    assert!(subscriber.dead_letters().is_empty());
}

async fn a_poison_message_holds_its_aggregate_until_released(test: TestDb) {
    a_poison_message_holds_its_aggregate_until_released_with(test, Transactions::PerMessage).await;
}

async fn a_poison_message_holds_its_aggregate_in_groups(test: TestDb) {
    a_poison_message_holds_its_aggregate_until_released_with(test, Transactions::Grouped).await;
}

async fn a_poison_message_holds_its_aggregate_until_released_with(
    test: TestDb,
    transactions: Transactions,
) {
    let inbox = setup(&test).await;
    let world = World::default();
    let subscriber = harness(&inbox, &world, transactions).await;
    let dead = poison("A", 2);
    let published = [
        step("A", 1),
        dead.clone(),
        step("A", 3),
        step("B", 1),
        step("A", 4),
    ];

    let settled = subscriber.deliver_all(&published).await.unwrap();
    assert_eq!(
        outcomes(&settled),
        expected(&[
            ("A", 1, "handled"),
            ("A", 2, "dead_lettered"),
            ("A", 3, "held"),
            ("B", 4, "handled"),
            ("A", 5, "held"),
        ])
    );
    match &settled[1].outcome {
        DeliveryOutcome::DeadLettered {
            kind,
            reason,
            holds_aggregate,
        } => {
            assert_eq!(*kind, DeadLetterKind::Rejected);
            assert!(reason.contains("poison step"), "{reason}");
            assert!(holds_aggregate);
        }
        other => panic!("dead-lettered, not {other:?}"),
    }
    let letters = subscriber.dead_letters();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (
            letters[0].message.id,
            letters[0].kind,
            letters[0].subject.as_deref()
        ),
        (dead.id, DeadLetterKind::Rejected, Some("dlq.steps"))
    );
    // The hold is in the inbox's real tables, visible to operators.
    let hold = inbox.holds().await.unwrap().remove(0);
    assert_eq!(
        (hold.aggregate_id.as_str(), hold.message_id, hold.waiting),
        ("A", dead.id, 2)
    );
    assert_eq!(applied(&test, "A").await, [1]);
    assert_eq!(applied(&test, "B").await, [1]);
    // Nothing released yet: nothing applied.
    assert!(subscriber.apply_releases().await.unwrap().is_empty());

    // Fixed and released: the dead message and what was parked behind it,
    // in order, each once; then the aggregate flows again.
    world.fixed.store(true, Ordering::SeqCst);
    assert!(inbox.release("account", "A", Release::Retry).await.unwrap());
    let released = subscriber.apply_releases().await.unwrap();
    assert_eq!(
        outcomes(&released),
        expected(&[
            ("A", 2, "handled"),
            ("A", 3, "handled"),
            ("A", 5, "handled")
        ])
    );
    assert_eq!(applied(&test, "A").await, [1, 2, 3, 4]);
    assert!(inbox.holds().await.unwrap().is_empty());
    let next = subscriber.deliver(&step("A", 5)).await.unwrap();
    assert_eq!(next[0].outcome, DeliveryOutcome::Handled);
    assert_eq!(applied(&test, "A").await, [1, 2, 3, 4, 5]);
}

async fn a_retryable_failure_is_retried_then_dead_lettered_exhausted(test: TestDb) {
    a_retryable_failure_is_retried_then_dead_lettered_exhausted_with(
        test,
        Transactions::PerMessage,
    )
    .await;
}

async fn a_retryable_failure_is_retried_then_dead_lettered_exhausted_in_groups(test: TestDb) {
    a_retryable_failure_is_retried_then_dead_lettered_exhausted_with(test, Transactions::Grouped)
        .await;
}

async fn a_retryable_failure_is_retried_then_dead_lettered_exhausted_with(
    test: TestDb,
    transactions: Transactions,
) {
    let inbox = setup(&test).await;
    let world = World::default();
    let subscriber = harness(&inbox, &world, transactions).await;

    // Two failures, three deliveries allowed: handled on the third.
    world.failures_left.store(2, Ordering::SeqCst);
    let settled = subscriber.deliver(&step("A", 1)).await.unwrap();
    let names: Vec<(u64, &str)> = settled
        .iter()
        .map(|s| (s.delivery, s.outcome.name()))
        .collect();
    assert_eq!(names, [(1, "retried"), (2, "retried"), (3, "handled")]);
    assert!(
        matches!(&settled[0].outcome, DeliveryOutcome::Retried { reason, .. } if reason.contains("busy"))
    );

    // Failing on every delivery: dead-lettered `exhausted` on the last,
    // its aggregate held; what follows it is parked.
    world.failures_left.store(u64::MAX, Ordering::SeqCst);
    let settled = subscriber
        .deliver_all(&[step("A", 2), step("A", 3)])
        .await
        .unwrap();
    let names: Vec<(u64, &str)> = settled
        .iter()
        .map(|s| (s.delivery, s.outcome.name()))
        .collect();
    assert_eq!(
        names,
        [
            (1, "retried"),
            (2, "retried"),
            (3, "dead_lettered"),
            (1, "held")
        ]
    );
    match &settled[2].outcome {
        DeliveryOutcome::DeadLettered { kind, reason, .. } => {
            assert_eq!(*kind, DeadLetterKind::Exhausted);
            assert!(reason.contains("all 3 deliveries"), "{reason}");
        }
        other => panic!("dead-lettered, not {other:?}"),
    }
    assert_eq!(subscriber.dead_letters()[0].deliveries, 3);
    assert_eq!(applied(&test, "A").await, [1]);

    // Skipped by the operator: never applied, what followed goes on.
    assert!(inbox.release("account", "A", Release::Skip).await.unwrap());
    world.failures_left.store(0, Ordering::SeqCst);
    let released = subscriber.apply_releases().await.unwrap();
    let names: Vec<&str> = released.iter().map(|s| s.outcome.name()).collect();
    assert_eq!(names, ["skipped", "handled"]);
    assert_eq!(applied(&test, "A").await, [1, 3]);
}

async fn the_builder_is_checked_as_build_checks_it(test: TestDb) {
    let inbox = setup(&test).await;
    let nats = TestSubscriber::jetstream().await.unwrap();
    // Handlers without an inbox, not told to run unordered: refused.
    let plain = Subscriber::builder(nats.clone(), CONSUMER)
        .stream("EVENTS")
        .on(|_: StepRecorded, _| async { Ok::<_, HandlerError>(()) });
    let err = TestSubscriber::new(plain).await.unwrap_err();
    assert!(
        matches!(
            err,
            TestSubscriberError::Build(SubscriberBuildError::NoInbox { .. })
        ),
        "{err}"
    );
    // An inbox whose tables are missing: refused, as at `build`.
    let elsewhere = Outbox::new(
        test.db.clone(),
        OutboxConfig::default()
            .with_inbox_table("missing_inbox")
            .unwrap(),
    );
    let missing = Inbox::new(&elsewhere, CONSUMER).unwrap();
    let err = TestSubscriber::new(steps_subscriber(nats, &missing, &World::default()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            TestSubscriberError::Build(SubscriberBuildError::InboxSchema { .. })
        ),
        "{err}"
    );
    drop(inbox);
}

txoutbox_suite::each_backend!(
    applied_once_in_order_and_unhandled_acked,
    applied_once_in_order_and_unhandled_acked_in_groups,
    a_poison_message_holds_its_aggregate_until_released,
    a_poison_message_holds_its_aggregate_in_groups,
    a_retryable_failure_is_retried_then_dead_lettered_exhausted,
    a_retryable_failure_is_retried_then_dead_lettered_exhausted_in_groups,
    the_builder_is_checked_as_build_checks_it,
);

/// The harness fails a test when the subscriber is wrong: handlers
/// without an inbox (`unordered`) apply a redelivery twice, which a test
/// asserting exactly-once effects catches.
#[tokio::test]
async fn a_subscriber_without_an_inbox_applies_a_redelivery_twice() {
    let applied = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&applied);
    let nats = TestSubscriber::jetstream().await.unwrap();
    let builder = Subscriber::builder(nats, CONSUMER)
        .stream("EVENTS")
        .unordered()
        .on(move |_: StepRecorded, _| {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok::<_, HandlerError>(())
            }
        });
    let subscriber = TestSubscriber::new(builder).await.unwrap();
    let first = step("A", 1);
    subscriber.deliver(&first).await.unwrap();
    let again = subscriber.deliver_once(&first).await.unwrap();
    assert_eq!(again.outcome, DeliveryOutcome::Handled, "not a duplicate");
    assert_eq!(applied.load(Ordering::SeqCst), 2, "applied twice");
}
