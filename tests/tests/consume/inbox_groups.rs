//! Inbox groups (`SubscriberBuilder::inbox_groups`) on PostgreSQL,
//! MariaDB and SQLite: a handler failing in the
//! middle of a group costs its aggregate only (the others' effects
//! committed once, without a redelivery; the failing aggregate retried, or
//! held behind a rejected message); a hot aggregate among many cold ones
//! keeps every aggregate's order; duplicates inside a group and across
//! groups are applied once; a batch handler (`Inbox::batch_handler`) takes
//! many aggregates in one call, each once, keeps every order, and a failing
//! batch costs its failing aggregate only. On PostgreSQL: a connection cut in the middle
//! of a group's commit acks nothing, and everything is applied once after.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sea_orm::ConnectionTrait;
use serde::{Deserialize, Serialize};
use txoutbox_core::{Delivery, HandlerError, IntegrationEvent, OutboxMessage};
use txoutbox_nats::subscriber::{InboxGroups, RunningSubscriber};
use txoutbox_sea_orm::inbox::{Batched, InboxBatchHandler};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, UnitOfWork};
use txoutbox_suite::subscriber::SubscriberFixture;
use txoutbox_suite::{Backend, TestDb};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "groups.order.changed")]
struct OrderChanged {
    step: u64,
}

/// How the handler treats a message: `(aggregate, sequence, delivery)` → fail.
type Failing = Arc<dyn Fn(&Delivery) -> Option<HandlerError> + Send + Sync>;

/// Every call of the handler: (aggregate, sequence, delivery).
type Calls = Arc<Mutex<Vec<(String, u64, u64)>>>;

/// Every call of a batch handler: its messages' (aggregate, sequence, delivery).
type Batches = Arc<Mutex<Vec<Vec<(String, u64, u64)>>>>;

/// `effects`: one row per applied message, numbered in the order they
/// were applied (committed).
async fn create_effects(test: &TestDb) {
    let id = match test.backend() {
        Backend::Postgres => "id BIGSERIAL PRIMARY KEY",
        Backend::MySql => "id BIGINT AUTO_INCREMENT PRIMARY KEY",
        Backend::Sqlite => "id INTEGER PRIMARY KEY AUTOINCREMENT",
    };
    test.db
        .execute_unprepared(&format!(
            "CREATE TABLE effects ({id}, message_id VARCHAR(64) NOT NULL, \
             aggregate_id VARCHAR(64) NOT NULL, sequence BIGINT NOT NULL, \
             delivery BIGINT NOT NULL)"
        ))
        .await
        .unwrap();
}

/// A subscriber on `fx` whose inbox handler records an effect per message
/// (and each call in `calls`), failing as `failing` says; groups wait up
/// to 300 ms for more messages, so what is published before the start
/// goes into one group.
async fn spawn(
    fx: &SubscriberFixture,
    inbox: &Inbox,
    calls: &Calls,
    failing: Failing,
) -> RunningSubscriber {
    let calls = Arc::clone(calls);
    let handler = inbox.handler_boxed(
        move |_: OrderChanged, delivery: Delivery, uow: &mut UnitOfWork| {
            calls.lock().unwrap().push((
                delivery.aggregate_id().to_owned(),
                delivery.sequence(),
                delivery.delivery_count(),
            ));
            let failure = failing(&delivery);
            Box::pin(async move {
                record_effect(uow, &delivery).await?;
                match failure {
                    Some(error) => Err(error),
                    None => Ok(()),
                }
            })
        },
    );
    fx.subscriber()
        .dead_letter(txoutbox_nats::subscriber::DeadLetterPolicy::terminate())
        .inbox_groups(
            InboxGroups::default()
                .max_messages(500)
                .max_wait(Duration::from_millis(300)),
        )
        .on(handler)
        .build()
        .await
        .unwrap()
        .spawn()
}

async fn record_effect(uow: &mut UnitOfWork, delivery: &Delivery) -> Result<(), HandlerError> {
    uow.connection()
        .await?
        .execute_unprepared(&format!(
            "INSERT INTO effects (message_id, aggregate_id, sequence, delivery) \
             VALUES ('{}', '{}', {}, {})",
            delivery.message_id(),
            delivery.aggregate_id(),
            delivery.sequence(),
            delivery.delivery_count()
        ))
        .await?;
    Ok(())
}

/// Publishes `steps` events of each aggregate, interleaved (step 1 of
/// every aggregate, then step 2, ...); returns them.
async fn publish(fx: &SubscriberFixture, aggregates: &[(&str, u64)]) -> Vec<OutboxMessage> {
    let most = aggregates
        .iter()
        .map(|(_, steps)| *steps)
        .max()
        .unwrap_or(0);
    let mut sent = Vec::new();
    for step in 1..=most {
        for (aggregate, steps) in aggregates {
            if step <= *steps {
                let message = fx.message(&OrderChanged { step }, aggregate, step);
                fx.publish(&message).await;
                sent.push(message);
            }
        }
    }
    sent
}

/// The applied effects: per aggregate, (sequence, delivery) in the order
/// they were committed.
async fn applied(test: &TestDb) -> HashMap<String, Vec<(i64, i64)>> {
    let mut by_aggregate: HashMap<String, Vec<(i64, i64)>> = HashMap::new();
    for row in test
        .rows("SELECT aggregate_id, sequence, delivery FROM effects ORDER BY id")
        .await
    {
        by_aggregate
            .entry(row.try_get("", "aggregate_id").unwrap())
            .or_default()
            .push((
                row.try_get("", "sequence").unwrap(),
                row.try_get("", "delivery").unwrap(),
            ));
    }
    by_aggregate
}

/// Every message of `aggregates` applied once, in order; every aggregate
/// but `o-5` from its first delivery, `o-5`'s first message on its retry.
async fn assert_only_o5_retried(test: &TestDb, aggregates: &[String], sent: usize) {
    let applied = applied(test).await;
    assert_eq!(
        applied.values().map(Vec::len).sum::<usize>(),
        sent,
        "each message once"
    );
    for aggregate in aggregates {
        let sequences: Vec<i64> = applied[aggregate].iter().map(|(s, _)| *s).collect();
        assert_eq!(sequences, [1, 2, 3], "{aggregate} in order, once each");
        if aggregate != "o-5" {
            assert!(
                applied[aggregate]
                    .iter()
                    .all(|(_, delivery)| *delivery == 1),
                "{aggregate} committed from its first delivery: {:?}",
                applied[aggregate]
            );
        }
    }
    assert_eq!(
        applied["o-5"][0],
        (1, 2),
        "o-5's first message applied on its retry"
    );
}

fn outbox(test: &TestDb) -> Outbox {
    Outbox::new(test.db.clone(), OutboxConfig::default().without_notify())
}

fn never() -> Failing {
    Arc::new(|_| None)
}

/// `o-5`'s first message fails on its first delivery, in a group with ten
/// aggregates: the group is applied again without `o-5`, so every other
/// aggregate's effects commit once, from their first delivery; `o-5`'s
/// message comes back after its backoff and its aggregate goes on in order.
async fn a_failing_handler_costs_its_aggregate_not_the_group(test: TestDb) {
    create_effects(&test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox(&test), &fx.durable).unwrap();
    let aggregates: Vec<String> = (1..=10).map(|n| format!("o-{n}")).collect();
    let shape: Vec<(&str, u64)> = aggregates.iter().map(|a| (a.as_str(), 3)).collect();
    let sent = publish(&fx, &shape).await;
    let calls = Calls::default();
    let failing: Failing = Arc::new(|delivery: &Delivery| {
        (delivery.aggregate_id() == "o-5" && delivery.sequence() == 1 && !delivery.is_redelivery())
            .then(|| HandlerError::retry("o-5 is not ready yet"))
    });
    let running = spawn(&fx, &inbox, &calls, failing).await;
    fx.settled(Duration::from_secs(20)).await;
    running.shutdown().await.unwrap();

    assert_only_o5_retried(&test, &aggregates, sent.len()).await;
    let calls = calls.lock().unwrap();
    let rolled_back = calls
        .iter()
        .filter(|(aggregate, sequence, delivery)| {
            aggregate != "o-5" && *delivery == 1 && {
                let runs = calls
                    .iter()
                    .filter(|c| c.0 == *aggregate && c.1 == *sequence && c.2 == 1)
                    .count();
                runs > 1
            }
        })
        .count();
    assert!(
        rolled_back > 0,
        "other aggregates shared o-5's group (run, rolled back, run again): {calls:?}"
    );
}

/// `o-3`'s second message is rejected in the middle of a group: it is
/// dead-lettered and `o-3` held behind it (its third message parked);
/// every other aggregate's effects commit once.
async fn a_rejected_message_holds_its_aggregate_and_the_group_goes_on(test: TestDb) {
    create_effects(&test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox(&test), &fx.durable).unwrap();
    let aggregates: Vec<String> = (1..=6).map(|n| format!("o-{n}")).collect();
    let shape: Vec<(&str, u64)> = aggregates.iter().map(|a| (a.as_str(), 3)).collect();
    let sent = publish(&fx, &shape).await;
    let failing: Failing = Arc::new(|delivery: &Delivery| {
        (delivery.aggregate_id() == "o-3" && delivery.sequence() == 2)
            .then(|| HandlerError::permanent("o-3 cannot take step 2"))
    });
    let running = spawn(&fx, &inbox, &Calls::default(), failing).await;
    fx.settled(Duration::from_secs(20)).await;
    running.shutdown().await.unwrap();

    let applied = applied(&test).await;
    assert_eq!(
        applied.values().map(Vec::len).sum::<usize>(),
        sent.len() - 2,
        "all but o-3's steps 2 and 3"
    );
    assert_eq!(
        applied["o-3"],
        [(1, 1)],
        "o-3 stops before its rejected step"
    );
    for aggregate in aggregates.iter().filter(|a| *a != "o-3") {
        assert_eq!(applied[aggregate], [(1, 1), (2, 1), (3, 1)], "{aggregate}");
    }
    let holds = inbox.holds().await.unwrap();
    assert_eq!(holds.len(), 1);
    assert_eq!(
        (holds[0].aggregate_id.as_str(), holds[0].waiting),
        ("o-3", 1)
    );
}

/// One hot aggregate (40 events) among 40 cold ones (1 each), interleaved:
/// groups take runs of the hot aggregate with the cold ones, and every
/// aggregate's messages are applied in order, once.
async fn a_hot_aggregate_among_cold_ones_keeps_every_order(test: TestDb) {
    create_effects(&test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox(&test), &fx.durable).unwrap();
    let cold: Vec<String> = (1..=40).map(|n| format!("cold-{n}")).collect();
    let mut shape: Vec<(&str, u64)> = vec![("hot", 40)];
    shape.extend(cold.iter().map(|a| (a.as_str(), 1)));
    let running = spawn(&fx, &inbox, &Calls::default(), never()).await;
    // Published while the subscriber runs, so groups form as they arrive.
    let sent = publish(&fx, &shape).await;
    fx.settled(Duration::from_secs(20)).await;
    running.shutdown().await.unwrap();

    let applied = applied(&test).await;
    assert_eq!(applied.values().map(Vec::len).sum::<usize>(), sent.len());
    let hot: Vec<i64> = applied["hot"].iter().map(|(s, _)| *s).collect();
    assert_eq!(
        hot,
        (1..=40).collect::<Vec<i64>>(),
        "the hot aggregate in order"
    );
    for aggregate in &cold {
        assert_eq!(applied[aggregate], [(1, 1)], "{aggregate}");
    }
}

/// A message published twice in a row (the same id at two stream
/// sequences, in one group) and again after everything was applied (in a
/// later group) is applied once.
async fn duplicates_inside_and_across_groups_are_applied_once(test: TestDb) {
    create_effects(&test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox(&test), &fx.durable).unwrap();
    let first = fx.message(&OrderChanged { step: 1 }, "d-1", 1);
    let second = fx.message(&OrderChanged { step: 2 }, "d-1", 2);
    let other = fx.message(&OrderChanged { step: 1 }, "d-2", 1);
    for message in [&first, &first, &other, &second, &second] {
        fx.publish(message).await;
    }
    let running = spawn(&fx, &inbox, &Calls::default(), never()).await;
    fx.settled(Duration::from_secs(20)).await;
    for message in [&second, &first, &other] {
        fx.publish(message).await;
    }
    fx.settled(Duration::from_secs(20)).await;
    running.shutdown().await.unwrap();

    let applied = applied(&test).await;
    assert_eq!(
        applied["d-1"],
        [(1, 1), (2, 1)],
        "d-1's two messages, once each, in order"
    );
    assert_eq!(applied["d-2"], [(1, 1)]);
    assert_eq!(test.count("outbox_inbox", "1=1").await, 3);
}

/// A batch handler (`Inbox::batch_handler_with`) that writes a whole
/// batch's effects in one statement, records each batch's messages
/// (aggregate, sequence, delivery), and fails a batch that holds a message
/// `failing` names.
struct BatchEffects {
    batches: Batches,
    failing: Failing,
}

impl InboxBatchHandler<OrderChanged> for BatchEffects {
    async fn handle_batch(
        &self,
        batch: Vec<Batched<OrderChanged>>,
        uow: &mut UnitOfWork,
    ) -> Result<(), HandlerError> {
        let seen = batch
            .iter()
            .map(|m| {
                let d = &m.delivery;
                (
                    d.aggregate_id().to_owned(),
                    d.sequence(),
                    d.delivery_count(),
                )
            })
            .collect();
        self.batches.lock().unwrap().push(seen);
        let rows: Vec<String> = batch
            .iter()
            .map(|m| {
                let d = &m.delivery;
                format!(
                    "('{}', '{}', {}, {})",
                    d.message_id(),
                    d.aggregate_id(),
                    d.sequence(),
                    d.delivery_count()
                )
            })
            .collect();
        uow.connection()
            .await?
            .execute_unprepared(&format!(
                "INSERT INTO effects (message_id, aggregate_id, sequence, delivery) VALUES {}",
                rows.join(", ")
            ))
            .await?;
        match batch.iter().find_map(|m| (self.failing)(&m.delivery)) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// A subscriber in groups whose handler is a [`BatchEffects`].
async fn spawn_batches(
    fx: &SubscriberFixture,
    inbox: &Inbox,
    batches: &Batches,
    failing: Failing,
) -> RunningSubscriber {
    let handler = inbox.batch_handler_with(BatchEffects {
        batches: Arc::clone(batches),
        failing,
    });
    fx.subscriber()
        .dead_letter(txoutbox_nats::subscriber::DeadLetterPolicy::terminate())
        .inbox_groups(
            InboxGroups::default()
                .max_messages(500)
                .max_wait(Duration::from_millis(300)),
        )
        .on(handler)
        .build()
        .await
        .unwrap()
        .spawn()
}

/// A batch handler takes many aggregates' messages in one call, never one
/// aggregate twice in a call; a hot aggregate (30 events) among 30 cold
/// ones (3 each) keeps every aggregate's order, each message applied once.
async fn a_batch_handler_takes_each_aggregate_once_a_call_and_keeps_every_order(test: TestDb) {
    create_effects(&test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox(&test), &fx.durable).unwrap();
    let cold: Vec<String> = (1..=30).map(|n| format!("cold-{n}")).collect();
    let mut shape: Vec<(&str, u64)> = vec![("hot", 30)];
    shape.extend(cold.iter().map(|a| (a.as_str(), 3)));
    let sent = publish(&fx, &shape).await;
    let batches = Batches::default();
    let running = spawn_batches(&fx, &inbox, &batches, never()).await;
    fx.settled(Duration::from_secs(20)).await;
    running.shutdown().await.unwrap();

    let applied = applied(&test).await;
    assert_eq!(
        applied.values().map(Vec::len).sum::<usize>(),
        sent.len(),
        "each once"
    );
    let hot: Vec<i64> = applied["hot"].iter().map(|(s, _)| *s).collect();
    assert_eq!(
        hot,
        (1..=30).collect::<Vec<i64>>(),
        "the hot aggregate in order"
    );
    for aggregate in &cold {
        assert_eq!(applied[aggregate], [(1, 1), (2, 1), (3, 1)], "{aggregate}");
    }
    let batches = batches.lock().unwrap();
    for batch in batches.iter() {
        let mut aggregates: Vec<&str> = batch.iter().map(|(a, _, _)| a.as_str()).collect();
        aggregates.sort_unstable();
        let calls = aggregates.len();
        aggregates.dedup();
        assert_eq!(
            aggregates.len(),
            calls,
            "one aggregate twice in a batch: {batch:?}"
        );
    }
    let largest = batches.iter().map(Vec::len).max().unwrap_or(0);
    assert!(
        largest >= 20,
        "messages of many aggregates in one call: largest batch {largest}"
    );
    assert!(
        batches.len() < sent.len() / 2,
        "{} calls for {} messages",
        batches.len(),
        sent.len()
    );
}

/// A batch fails because of `o-5`'s first message (on its first delivery):
/// the group is applied again with that batch's messages one by one, so
/// only `o-5` pays (retried after its backoff, then in order); every other
/// aggregate's effects commit once, from their first delivery.
async fn a_failing_batch_costs_its_aggregate_not_the_batch(test: TestDb) {
    create_effects(&test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox(&test), &fx.durable).unwrap();
    let aggregates: Vec<String> = (1..=10).map(|n| format!("o-{n}")).collect();
    let shape: Vec<(&str, u64)> = aggregates.iter().map(|a| (a.as_str(), 3)).collect();
    let sent = publish(&fx, &shape).await;
    let failing: Failing = Arc::new(|delivery: &Delivery| {
        (delivery.aggregate_id() == "o-5" && delivery.sequence() == 1 && !delivery.is_redelivery())
            .then(|| HandlerError::retry("o-5 is not ready yet"))
    });
    let batches = Batches::default();
    let running = spawn_batches(&fx, &inbox, &batches, failing).await;
    fx.settled(Duration::from_secs(20)).await;
    running.shutdown().await.unwrap();

    assert_only_o5_retried(&test, &aggregates, sent.len()).await;
    let batches = batches.lock().unwrap();
    assert!(
        batches
            .iter()
            .any(|b| b.len() > 1 && b.iter().any(|(a, s, _)| a == "o-5" && *s == 1)),
        "o-5's message first failed inside a larger batch: {batches:?}"
    );
    assert!(
        batches
            .iter()
            .any(|b| b.len() == 1 && b[0].0 == "o-5" && b[0].1 == 1 && b[0].2 == 1),
        "then failed alone: {batches:?}"
    );
}

txoutbox_suite::each_backend!(
    a_batch_handler_takes_each_aggregate_once_a_call_and_keeps_every_order,
    a_failing_batch_costs_its_aggregate_not_the_batch,
    a_failing_handler_costs_its_aggregate_not_the_group,
    a_rejected_message_holds_its_aggregate_and_the_group_goes_on,
    a_hot_aggregate_among_cold_ones_keeps_every_order,
    duplicates_inside_and_across_groups_are_applied_once,
);

/// PostgreSQL: the connection of a group is cut in the middle of its
/// commit (a deferred trigger makes the backend terminate itself while
/// committing, once): nothing of the group is committed or acked; the cut
/// is the database's, so the group goes back to its lanes, unsettled, and
/// is applied again without spending a delivery: every message once, in
/// order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_connection_cut_mid_commit_acks_nothing_and_applies_everything_once() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    create_effects(&test).await;
    test.db
        .execute_unprepared(
            "CREATE SEQUENCE cut_once; \
             CREATE FUNCTION cut_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF nextval('cut_once') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); \
             END IF; RETURN NULL; END $$; \
             CREATE CONSTRAINT TRIGGER cut AFTER INSERT ON effects DEFERRABLE INITIALLY DEFERRED \
             FOR EACH ROW EXECUTE FUNCTION cut_at_commit();",
        )
        .await
        .unwrap();
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox(&test), &fx.durable).unwrap();
    let aggregates: Vec<String> = (1..=8).map(|n| format!("o-{n}")).collect();
    let shape: Vec<(&str, u64)> = aggregates.iter().map(|a| (a.as_str(), 3)).collect();
    let sent = publish(&fx, &shape).await;
    let running = spawn(&fx, &inbox, &Calls::default(), never()).await;
    fx.settled(Duration::from_secs(30)).await;
    running.shutdown().await.unwrap();

    let applied = applied(&test).await;
    assert_eq!(
        applied.values().map(Vec::len).sum::<usize>(),
        sent.len(),
        "each message once"
    );
    for aggregate in &aggregates {
        let sequences: Vec<i64> = applied[aggregate].iter().map(|(s, _)| *s).collect();
        assert_eq!(sequences, [1, 2, 3], "{aggregate} in order, once each");
    }
    // The cut is the database's, not the messages': the group was applied
    // again (the trigger ran after the cut) without spending a delivery.
    assert!(
        applied
            .values()
            .flatten()
            .all(|(_, delivery)| *delivery == 1),
        "the cut spent no delivery: {applied:?}"
    );
    let fired: i64 = test
        .row("SELECT last_value FROM cut_once")
        .await
        .try_get("", "last_value")
        .unwrap();
    assert!(fired > 1, "the cut group was applied again ({fired})");
    assert_eq!(test.count("outbox_inbox", "1=1").await, sent.len() as i64);
}
