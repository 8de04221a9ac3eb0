//! Deadlocks are contention the caller can retry, and `Outbox::transaction`
//! retries them: two units of work that save the same two orders in
//! opposite orders deadlock (PostgreSQL, MariaDB); the database's victim
//! fails with `OutboxError::Contention` and, run through
//! `Outbox::transaction`, is run again from the start, reloading both
//! orders (a retry that loaded them before the winner committed meets a
//! concurrency conflict and runs once more), and commits. Every event is
//! written once. On every backend, `Outbox::transaction` with an
//! application's own error type: retried on a concurrency conflict, not on
//! the application's own error, as a `TransactionRetry` predicate says
//! otherwise; and its future runs in `tokio::spawn` and as an axum handler.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::Barrier;
use txoutbox_sea_orm::{Outbox, OutboxConfig, OutboxError, TransactionRetry, UnitOfWork};
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
                .transaction(async |mut uow| {
                    // Only the first attempts meet; a retry runs alone.
                    let first_attempt = counted.fetch_add(1, Ordering::SeqCst) == 0;
                    // The application's error type says nothing of
                    // contention: the unit of work noted it.
                    amend_both(&mut uow, first, second, first_attempt.then_some(&*barrier))
                        .await
                        .map_err(|err| AppError::Other(err.to_string()))
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

/// An application's error type, as a service has one.
#[derive(Debug)]
enum AppError {
    NotFound,
    Busy,
    Other(#[expect(dead_code, reason = "read through Debug, in failure messages")] String),
    Outbox(OutboxError),
}

impl From<OutboxError> for AppError {
    fn from(err: OutboxError) -> Self {
        AppError::Outbox(err)
    }
}

/// Adds `cents` to order "a" in a transaction; both callers load it at the
/// same version (they meet after loading, on their first attempt), so the
/// second to commit meets a concurrency conflict (or, on SQLite, a busy
/// database) and is run again. Returns the total it committed.
async fn add_to_a(
    outbox: &Outbox,
    cents: i64,
    meet: &Barrier,
    attempts: &AtomicU32,
) -> Result<i64, AppError> {
    outbox
        .transaction(async |mut uow| {
            let first_attempt = attempts.fetch_add(1, Ordering::SeqCst) == 0;
            let mut order = uow
                .load::<Order>("a".to_owned())
                .await?
                .ok_or(AppError::NotFound)?;
            if first_attempt {
                meet.wait().await;
            }
            let total = order.total_cents + cents;
            order
                .amend(total)
                .map_err(|err| AppError::Other(err.to_string()))?;
            uow.save(&mut order).await?;
            Ok(total)
        })
        .await
}

async fn an_app_error_type_is_retried_on_a_conflict(test: TestDb) {
    let outbox = two_orders(&test).await;
    let meet = Barrier::new(2);
    let attempts = [AtomicU32::new(0), AtomicU32::new(0)];
    let (one, other) = tokio::join!(
        add_to_a(&outbox, 1, &meet, &attempts[0]),
        add_to_a(&outbox, 10, &meet, &attempts[1]),
    );
    let (one, other) = (one.expect("committed"), other.expect("committed"));
    let mut runs = attempts.map(|a| a.load(Ordering::SeqCst));
    runs.sort_unstable();
    assert_eq!(runs[0], 1, "the first to commit ran once: {runs:?}");
    assert!(runs[1] >= 2, "the other was run again: {runs:?}");
    // The retry reloaded the order: both additions count, in the order
    // they committed.
    let mut totals = [one, other];
    totals.sort_unstable();
    assert!(totals == [101, 111] || totals == [110, 111], "{totals:?}");
    let order = outbox
        .repository::<Order>()
        .load("a".to_owned())
        .await
        .expect("load")
        .expect("order a");
    assert_eq!(order.total_cents, 111);
    assert_eq!(
        test.count(TABLE, "aggregate_id = 'a' AND sequence IN (1, 2, 3)")
            .await,
        3,
        "placed + two amendments, each once"
    );
}

async fn an_app_error_of_its_own_is_not_retried(test: TestDb) {
    let outbox = two_orders(&test).await;
    let attempts = AtomicU32::new(0);
    let result: Result<(), AppError> = outbox
        .transaction(async |mut uow| {
            attempts.fetch_add(1, Ordering::SeqCst);
            let mut order = uow.load::<Order>("a".to_owned()).await?.expect("a");
            order.amend(1).expect("record");
            uow.save(&mut order).await?; // rolled back below
            uow.load::<Order>("nope".to_owned())
                .await?
                .ok_or(AppError::NotFound)?;
            Ok(())
        })
        .await;
    assert!(matches!(result, Err(AppError::NotFound)), "{result:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!(test.count(TABLE, "1=1").await, 2, "nothing committed");
}

async fn a_retry_predicate_decides(test: TestDb) {
    let outbox = two_orders(&test).await;
    let attempts = AtomicU32::new(0);
    let retry = TransactionRetry::when(|err: &AppError| matches!(err, AppError::Busy));
    let committed = outbox
        .transaction_with(retry, async |mut uow| {
            if attempts.fetch_add(1, Ordering::SeqCst) < 2 {
                return Err(AppError::Busy);
            }
            let mut order = uow.load::<Order>("a".to_owned()).await?.expect("a");
            order.amend(7).expect("record");
            uow.save(&mut order).await?;
            Ok(order.total_cents)
        })
        .await
        .expect("the third attempt commits");
    assert_eq!((committed, attempts.load(Ordering::SeqCst)), (7, 3));
    assert_eq!(test.count(TABLE, "aggregate_id = 'a'").await, 2);

    // `never`: a conflict is returned as it is.
    let attempts = AtomicU32::new(0);
    let result: Result<(), AppError> = outbox
        .transaction_with(TransactionRetry::never(), async |mut uow| {
            attempts.fetch_add(1, Ordering::SeqCst);
            let mut order = uow.load::<Order>("b".to_owned()).await?.expect("b");
            // Meanwhile, another writer moves the order on.
            let orders = outbox.repository::<Order>();
            let mut other = orders.load("b".to_owned()).await?.expect("b");
            other.amend(1).expect("record");
            orders.save(&mut other).await?;
            order.amend(2).expect("record");
            uow.save(&mut order).await?;
            Ok(())
        })
        .await;
    assert!(
        matches!(&result, Err(AppError::Outbox(err)) if err.is_retryable()),
        "{result:?}"
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
}

async fn a_kept_unit_of_work_commits_nothing(test: TestDb) {
    let outbox = two_orders(&test).await;
    let result = outbox
        .transaction(async |mut uow| {
            let mut order = uow.load::<Order>("a".to_owned()).await?.expect("a");
            order.amend(5).expect("record");
            uow.save(&mut order).await?;
            Ok::<_, OutboxError>(uow) // kept: returned to the caller
        })
        .await;
    assert!(
        matches!(result, Err(OutboxError::UnitOfWorkKept)),
        "{result:?}"
    );
    assert_eq!(test.count(TABLE, "1=1").await, 2, "nothing committed");
}

/// A handler as axum takes it: its future must be `Send`.
async fn handler(outbox: Outbox, id: String) -> Result<i64, AppError> {
    outbox
        .transaction(async |mut uow| {
            let order = uow
                .load::<Order>(id.clone())
                .await?
                .ok_or(AppError::NotFound)?;
            Ok(order.total_cents)
        })
        .await
}

fn assert_send<F: std::future::Future + Send>(future: F) -> F {
    future
}

#[tokio::test]
async fn a_transaction_runs_in_spawned_tasks_and_handlers() {
    let test = TestDb::with_schema(Backend::Sqlite).await;
    let outbox = two_orders(&test).await;
    // As an axum handler.
    let total = assert_send(handler(outbox.clone(), "a".to_owned()))
        .await
        .expect("a");
    assert_eq!(total, 100);
    // In a spawned task, capturing the task's own state by reference.
    let id = "b".to_owned();
    let spawned = tokio::spawn(async move {
        outbox
            .transaction(async |mut uow| {
                let mut order = uow
                    .load::<Order>(id.clone())
                    .await?
                    .ok_or(AppError::NotFound)?;
                order
                    .amend(order.total_cents + 1)
                    .map_err(|err| AppError::Other(err.to_string()))?;
                uow.save(&mut order).await?;
                Ok::<_, AppError>(order.total_cents)
            })
            .await
    });
    assert_eq!(spawned.await.expect("task").expect("committed"), 101);
    assert_eq!(test.count(TABLE, "aggregate_id = 'b'").await, 2);
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

mod each {
    use super::*;
    txoutbox_suite::each_backend!(
        an_app_error_type_is_retried_on_a_conflict,
        an_app_error_of_its_own_is_not_retried,
        a_retry_predicate_decides,
        a_kept_unit_of_work_commits_nothing,
    );
}
