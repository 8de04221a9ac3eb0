//! Saving aggregates on a transaction the application owns
//! (`Outbox::join`), on PostgreSQL, MariaDB and SQLite: the application's
//! own statements, the aggregates' rows and their events commit or roll
//! back together; versions are checked and sequences continue across
//! joined transactions and units of work alike; `AfterCommit::wake` hands
//! the messages to this process's processor.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::time::Duration;

use sea_orm::{ConnectionTrait, Statement, TransactionTrait};
use serde::{Deserialize, Serialize};
use txoutbox_core::{AggregateRoot, IntegrationEvent};
use txoutbox_sea_orm::{CommitEvent, Outbox, OutboxConfig, OutboxError, STANDALONE};
use txoutbox_suite::TestDb;
use txoutbox_suite::orders::Order;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "test.join.audited")]
struct Audited {
    what: String,
}

fn outbox(test: &TestDb) -> Outbox {
    Outbox::new(test.db.clone(), OutboxConfig::default().without_notify())
}

async fn create_audit(test: &TestDb) {
    test.db
        .execute_unprepared("CREATE TABLE audit (what VARCHAR(64) NOT NULL)")
        .await
        .unwrap();
}

/// `(event name, sequence)` of the outbox rows of `aggregate_id`, in order.
async fn events_of(test: &TestDb, aggregate_id: &str) -> Vec<(String, i64)> {
    test.db
        .query_all_raw(Statement::from_string(
            test.db.get_database_backend(),
            format!(
                "SELECT event_name, sequence FROM outbox_messages \
                 WHERE aggregate_id = '{aggregate_id}' ORDER BY sequence"
            ),
        ))
        .await
        .unwrap()
        .iter()
        .map(|row| {
            (
                row.try_get::<String>("", "event_name").unwrap(),
                row.try_get::<i64>("", "sequence").unwrap(),
            )
        })
        .collect()
}

async fn commits_with_the_application(test: TestDb) {
    create_audit(&test).await;
    let outbox = outbox(&test);
    let mut listener = outbox.listen();

    let txn = test.db.begin().await.unwrap();
    txn.execute_unprepared("INSERT INTO audit (what) VALUES ('placed o-1')")
        .await
        .unwrap();
    let mut joined = outbox.join(&txn);
    let mut order = Order::place("o-1", 100).unwrap();
    joined.save(&mut order).await.unwrap();
    order.amend(150).unwrap();
    joined.save(&mut order).await.unwrap();
    let standalone = joined
        .enqueue(&Audited { what: "o-1".into() })
        .await
        .unwrap();
    let written = joined.after_commit();
    assert_eq!(test.count("audit", "1=1").await, 0, "nothing visible yet");
    txn.commit().await.unwrap();
    let ids = written.wake();

    assert_eq!(ids.len(), 3);
    assert_eq!(ids[2], standalone);
    assert_eq!(test.count("audit", "1=1").await, 1);
    assert_eq!(
        events_of(&test, "o-1").await,
        [
            ("test.order.placed".to_owned(), 1),
            ("test.order.amended".to_owned(), 2)
        ]
    );
    assert_eq!(
        test.count(
            "outbox_messages",
            &format!("aggregate_type = '{STANDALONE}'")
        )
        .await,
        1
    );
    assert_eq!(order.version(), 2);
    assert!(order.events().pending().is_empty());
    match tokio::time::timeout(Duration::from_secs(5), listener.recv()).await {
        Ok(Some(CommitEvent::Committed(messages))) => {
            let woken: Vec<_> = messages.iter().map(|m| m.id).collect();
            assert_eq!(woken, ids, "the processor is handed the messages");
        }
        other => panic!("expected the committed messages, got {other:?}"),
    }

    // The next change, through a unit of work, continues the sequence.
    let orders = outbox.repository::<Order>();
    let mut order = orders.load("o-1").await.unwrap().unwrap();
    order.amend(200).unwrap();
    orders.save(&mut order).await.unwrap();
    // ... and a joined transaction after it too.
    let txn = test.db.begin().await.unwrap();
    let mut joined = outbox.join(&txn);
    let mut order = joined.load::<Order>("o-1").await.unwrap().unwrap();
    order.amend(250).unwrap();
    joined.save(&mut order).await.unwrap();
    let written = joined.after_commit();
    txn.commit().await.unwrap();
    let _ = written.wake();
    let sequences: Vec<i64> = events_of(&test, "o-1").await.iter().map(|e| e.1).collect();
    assert_eq!(sequences, [1, 2, 3, 4]);
}

async fn rolls_back_with_the_application(test: TestDb) {
    create_audit(&test).await;
    let outbox = outbox(&test);
    let txn = test.db.begin().await.unwrap();
    txn.execute_unprepared("INSERT INTO audit (what) VALUES ('ghost')")
        .await
        .unwrap();
    let mut joined = outbox.join(&txn);
    joined
        .save(&mut Order::place("o-ghost", 1).unwrap())
        .await
        .unwrap();
    drop(joined.after_commit()); // rolled back: nothing to announce
    txn.rollback().await.unwrap();
    assert_eq!(test.count("audit", "1=1").await, 0);
    assert_eq!(test.count("orders", "1=1").await, 0);
    assert_eq!(
        test.count("outbox_messages", "1=1").await,
        0,
        "no ghost event"
    );
}

async fn a_stale_aggregate_is_a_conflict(test: TestDb) {
    let outbox = outbox(&test);
    let orders = outbox.repository::<Order>();
    orders
        .save(&mut Order::place("o-1", 100).unwrap())
        .await
        .unwrap();
    let mut stale = orders.load("o-1").await.unwrap().unwrap();
    let mut fresh = orders.load("o-1").await.unwrap().unwrap();
    fresh.amend(110).unwrap();
    orders.save(&mut fresh).await.unwrap();

    let txn = test.db.begin().await.unwrap();
    let mut joined = outbox.join(&txn);
    stale.amend(120).unwrap();
    let err = joined.save(&mut stale).await.unwrap_err();
    assert!(
        matches!(err, OutboxError::ConcurrencyConflict { .. }),
        "{err:?}"
    );
    assert_eq!(stale.events().pending().len(), 1, "left as it was");
    drop(joined);
    txn.rollback().await.unwrap();
    assert_eq!(events_of(&test, "o-1").await.len(), 2);
}

txoutbox_suite::each_backend!(
    commits_with_the_application,
    rolls_back_with_the_application,
    a_stale_aggregate_is_a_conflict,
);
