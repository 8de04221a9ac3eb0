//! Slow handlers in inbox groups, on PostgreSQL: a group stalled longer
//! than the ack wait (its handler waits on a row lock) keeps every message
//! it took alive, the members and those applied alone or going back to
//! their lanes after it: none is redelivered. A transaction that PostgreSQL
//! ends because a handler left it idle past the idle limit is not charged to
//! the next handler, whose statement is the one that fails: the group is
//! applied again, no delivery spent.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sea_orm::{ConnectionTrait, TransactionTrait};
use serde::{Deserialize, Serialize};
use txoutbox_core::{Delivery, IntegrationEvent};
use txoutbox_nats::subscriber::{DeadLetterPolicy, InboxGroups, SubscriberBuilder};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig};
use txoutbox_suite::effects;
use txoutbox_suite::subscriber::SubscriberFixture;
use txoutbox_suite::{Backend, TestDb};

/// Applied (an effect row) by the inbox handler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "slow.order.changed")]
struct OrderChanged {
    step: u64,
}

/// No handler takes it: acked unhandled, applied alone (not in a group).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "slow.order.noted")]
struct OrderNoted {
    step: u64,
}

/// Every call of the handler: (aggregate, sequence, delivery).
type Calls = Arc<Mutex<Vec<(String, u64, u64)>>>;

/// (aggregate, sequence, delivery) of every effect, in the order applied.
async fn effects(test: &TestDb) -> Vec<(String, i64, i64)> {
    test.rows("SELECT aggregate_id, sequence, delivery FROM deliveries ORDER BY id")
        .await
        .iter()
        .map(|row| {
            (
                row.try_get("", "aggregate_id").unwrap(),
                row.try_get("", "sequence").unwrap(),
                row.try_get("", "delivery").unwrap(),
            )
        })
        .collect()
}

/// The fixture's subscriber (ack wait 2 s) in inbox groups that wait up to
/// 300 ms for more messages, so what is published before the start goes
/// into one group.
fn grouped(fx: &SubscriberFixture) -> SubscriberBuilder {
    fx.subscriber()
        .dead_letter(DeadLetterPolicy::terminate())
        .inbox_groups(
            InboxGroups::default()
                .max_messages(500)
                .max_wait(Duration::from_millis(300)),
        )
}

fn inbox(test: &TestDb, fx: &SubscriberFixture) -> Inbox {
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default().without_notify());
    Inbox::new(&outbox, &fx.durable).unwrap()
}

/// A group whose one member waits on a lock the test holds for 5 s (the
/// ack wait is 2 s) also holds ten aggregates' unhandled messages (to be
/// acked alone after the group) and one aggregate's applied message behind
/// its unhandled one (back to its lane after the group): every one of them
/// is kept alive, none is redelivered (before: the eleven not in the group
/// came back after the ack wait, while the group waited).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_stalled_past_the_ack_wait_keeps_every_message_it_took_alive() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    effects::create_deliveries_table(&test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = inbox(&test, &fx);
    fx.publish(&fx.message(&OrderChanged { step: 1 }, "locked", 1))
        .await;
    for n in 1..=10 {
        fx.publish(&fx.message(&OrderNoted { step: 1 }, &format!("noted-{n}"), 1))
            .await;
    }
    fx.publish(&fx.message(&OrderNoted { step: 1 }, "behind", 1))
        .await;
    fx.publish(&fx.message(&OrderChanged { step: 2 }, "behind", 2))
        .await;

    let lock = test.db.begin().await.unwrap();
    lock.execute_unprepared("LOCK TABLE deliveries IN EXCLUSIVE MODE")
        .await
        .unwrap();
    let running = grouped(&fx)
        .on(
            inbox.handler_boxed(|_: OrderChanged, delivery: Delivery, uow| {
                Box::pin(async move { effects::apply_delivery(uow, &delivery).await })
            }),
        )
        .build()
        .await
        .unwrap()
        .spawn();
    // The group waits on the lock for 5 s: 2.5 ack waits.
    let mut redelivered = 0;
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < until {
        redelivered = redelivered.max(fx.consumer_info().await.num_redelivered);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    lock.rollback().await.unwrap();
    fx.settled(Duration::from_secs(20)).await;
    running.shutdown().await.unwrap();

    assert_eq!(
        redelivered, 0,
        "messages held while the group waited were redelivered"
    );
    let effects = effects(&test).await;
    assert_eq!(
        effects,
        [("locked".to_owned(), 1, 1), ("behind".to_owned(), 2, 1)],
        "each applied once, from its first delivery"
    );
    fx.delete().await;
}

/// Handler k (`idle`, first call only) leaves its group's transaction idle
/// past the idle limit (300 ms): PostgreSQL ends the session (25P03), and
/// the statement that fails is handler k+1's (`next`). The cut is the
/// database's: the group goes back to its lanes and is applied again, no
/// delivery spent, nothing dead-lettered, every effect once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_ended_by_the_idle_limit_is_charged_to_nobody() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    effects::create_deliveries_table(&test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = inbox(&test, &fx);
    fx.publish(&fx.message(&OrderChanged { step: 1 }, "idle", 1))
        .await;
    fx.publish(&fx.message(&OrderChanged { step: 1 }, "next", 1))
        .await;
    let calls = Calls::default();
    let idled = Arc::new(AtomicBool::new(false));
    let handler = {
        let calls = Arc::clone(&calls);
        inbox.handler_boxed(move |_: OrderChanged, delivery: Delivery, uow| {
            calls.lock().unwrap().push((
                delivery.aggregate_id().to_owned(),
                delivery.sequence(),
                delivery.delivery_count(),
            ));
            let idles = delivery.aggregate_id() == "idle" && !idled.swap(true, Ordering::SeqCst);
            Box::pin(async move {
                effects::apply_delivery(uow, &delivery).await?;
                if idles {
                    tokio::time::sleep(Duration::from_millis(1_500)).await;
                }
                Ok(())
            })
        })
    };
    let running = grouped(&fx)
        .idle_transaction_limit(Duration::from_millis(300))
        .on(handler)
        .build()
        .await
        .unwrap()
        .spawn();
    fx.settled(Duration::from_secs(20)).await;
    running.shutdown().await.unwrap();

    let calls = calls.lock().unwrap().clone();
    let next: Vec<u64> = calls
        .iter()
        .filter(|(aggregate, ..)| aggregate == "next")
        .map(|(.., delivery)| *delivery)
        .collect();
    assert!(
        next.len() >= 2,
        "next's statement failed once and it ran again: {calls:?}"
    );
    assert!(
        next.iter().all(|delivery| *delivery == 1),
        "no delivery of next spent: {calls:?}"
    );
    let mut effects = effects(&test).await;
    effects.sort();
    assert_eq!(
        effects,
        [("idle".to_owned(), 1, 1), ("next".to_owned(), 1, 1)],
        "each applied once, from its first delivery"
    );
    assert_eq!(fx.consumer_info().await.num_redelivered, 0);
    fx.delete().await;
}
