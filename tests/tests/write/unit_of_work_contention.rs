//! Deadlocks are contention the caller can retry, and `Outbox::transaction`
//! retries them: two units of work that save the same two orders in
//! opposite orders deadlock (PostgreSQL, MariaDB); the database's victim
//! fails with `OutboxError::Contention` and, run through
//! `Outbox::transaction`, is run again from the start, reloading both
//! orders (a retry that loaded them before the winner committed meets a
//! concurrency conflict and runs once more), and commits. Every event is
//! written once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::Barrier;
use txoutbox_sea_orm::{Outbox, OutboxConfig, OutboxError, UnitOfWork};
use txoutbox_suite::orders::Order;
use txoutbox_suite::{Backend, TestDb};

const TABLE: &str = "outbox_messages";

async fn two_orders(test: &TestDb) -> Outbox {
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default());
    for id in ["a", "b"] {
        let mut order = Order::place(id, 100).expect("record");
        outbox
            .repository::<Order>()
            .save(&mut order)
            .await
            .expect("save");
    }
    outbox
}

/// Amends `first`, holds its row lock, waits for the other unit to hold
/// its own (when `meet` is given), then amends `second`.
async fn amend_both(
    uow: &mut UnitOfWork,
    first: &str,
    second: &str,
    meet: Option<&Barrier>,
) -> Result<(), OutboxError> {
    let mut order = uow.load::<Order>(first.to_owned()).await?.expect("exists");
    order.amend(200).expect("record");
    uow.save(&mut order).await?;
    uow.connection().await?; // the row is written, and locked, now
    if let Some(barrier) = meet {
        barrier.wait().await;
    }
    let mut order = uow.load::<Order>(second.to_owned()).await?.expect("exists");
    order.amend(300).expect("record");
    uow.save(&mut order).await?;
    Ok(())
}

async fn a_deadlock_is_contention(test: TestDb) {
    let outbox = two_orders(&test).await;
    let barrier = Arc::new(Barrier::new(2));
    let run = |first: &'static str, second: &'static str| {
        let (outbox, barrier) = (outbox.clone(), Arc::clone(&barrier));
        tokio::spawn(async move {
            let mut uow = outbox.begin();
            amend_both(&mut uow, first, second, Some(&barrier)).await?;
            uow.commit().await.map(|_| ())
        })
    };
    let (one, other) = (run("a", "b"), run("b", "a"));
    let results = [one.await.expect("task"), other.await.expect("task")];
    let failed: Vec<&OutboxError> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(failed.len(), 1, "one deadlock victim: {results:?}");
    assert!(
        matches!(failed[0], OutboxError::Contention(_)) && failed[0].is_retryable(),
        "{:?}",
        failed[0]
    );
    // The victim wrote nothing.
    assert_eq!(test.count(TABLE, "1=1").await, 4);
}

async fn transaction_retries_a_deadlock_and_writes_each_event_once(test: TestDb) {
    let outbox = two_orders(&test).await;
    let barrier = Arc::new(Barrier::new(2));
    let run = |first: &'static str, second: &'static str| {
        let (outbox, barrier) = (outbox.clone(), Arc::clone(&barrier));
        let attempts = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&attempts);
        let task = tokio::spawn(async move {
            outbox
                .transaction(move |uow| {
                    let (barrier, attempts) = (Arc::clone(&barrier), Arc::clone(&counted));
                    Box::pin(async move {
                        // Only the first attempts meet; a retry runs alone.
                        let first_attempt = attempts.fetch_add(1, Ordering::SeqCst) == 0;
                        amend_both(uow, first, second, first_attempt.then_some(&*barrier)).await
                    })
                })
                .await
        });
        (task, attempts)
    };
    let ((one, one_attempts), (other, other_attempts)) = (run("a", "b"), run("b", "a"));
    one.await.expect("task").expect("committed");
    other.await.expect("task").expect("committed");
    let attempts = [
        one_attempts.load(Ordering::SeqCst),
        other_attempts.load(Ordering::SeqCst),
    ];
    // The deadlock's winner ran once; its victim ran again, and maybe a
    // third time: its retry can load the orders before the winner commits
    // and then meet a concurrency conflict, retryable too.
    let (mut fewer, mut more) = (attempts[0], attempts[1]);
    if fewer > more {
        std::mem::swap(&mut fewer, &mut more);
    }
    assert!(
        fewer == 1 && (2..=txoutbox_sea_orm::TRANSACTION_ATTEMPTS).contains(&more),
        "one unit ran once, the other was retried: {attempts:?}"
    );
    // Both units committed: each order placed, then amended by both.
    for id in ["a", "b"] {
        assert_eq!(
            test.count(TABLE, &format!("aggregate_id = '{id}'")).await,
            3,
            "order {id}: placed + two amendments, each once"
        );
        assert_eq!(
            test.count(
                TABLE,
                &format!("aggregate_id = '{id}' AND sequence IN (1, 2, 3)")
            )
            .await,
            3
        );
    }
}

macro_rules! on_servers {
    ($($name:ident),*) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(txoutbox_suite::TestDb::with_schema(super::Backend::Postgres).await).await
                }
            )*
        }
        mod mysql {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(txoutbox_suite::TestDb::with_schema(super::Backend::MySql).await).await
                }
            )*
        }
    };
}

on_servers!(
    a_deadlock_is_contention,
    transaction_retries_a_deadlock_and_writes_each_event_once
);
