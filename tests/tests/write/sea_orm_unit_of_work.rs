//! Acceptance tests of the write path on PostgreSQL, MariaDB and SQLite:
//! atomicity of state and events, optimistic concurrency, sequence numbers,
//! standalone messages, typed errors, the message context's round trip,
//! migrations, and commit wake-ups (in process, and `NOTIFY` on PostgreSQL).
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sea_orm::sea_query::Expr;
use sea_orm::sqlx::postgres::PgListener;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, ExecResult,
    QueryFilter, QueryResult, Set, Statement, TransactionTrait,
};
use sea_orm_migration::{MigrationTrait, MigratorTrait};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Barrier;
use tokio::time::timeout;
use txoutbox_core::{
    AggregateRoot, IntegrationEvent, MessageContext, MessageId, OutboxMessage, OutboxStore,
    PendingMessage, RecordError,
};
use txoutbox_sea_orm::migration::OutboxMigrator;
use txoutbox_sea_orm::{
    CommitEvent, Outbox, OutboxConfig, OutboxError, Repository, STANDALONE, SeaOrmOutboxStore,
    UnitOfWork, create_schema,
};
use txoutbox_suite::orders::{Order, OrderAmended, entity};
use txoutbox_suite::{Backend, TestDb};
use uuid::Uuid;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A standalone event (no aggregate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "test.uow.ping")]
struct Ping {
    n: u32,
}

/// An event serde_json cannot serialize: map keys must be strings.
#[derive(Debug, Clone, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "test.uow.unserializable")]
struct Unserializable {
    cells: HashMap<(u8, u8), u8>,
}

// ---------------------------------------------------------------- helpers

fn outbox(test: &TestDb) -> Outbox {
    Outbox::new(test.db.clone(), OutboxConfig::default())
}

/// One outbox row, as stored.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    id: Uuid,
    event_name: String,
    aggregate_type: String,
    aggregate_id: String,
    sequence: i64,
    status: i64,
    attempts: i64,
    correlation_id: String,
    payload: serde_json::Value,
}

/// Reads an integer column whatever its width on this backend.
fn int(row: &QueryResult, column: &str) -> i64 {
    row.try_get::<i64>("", column)
        .or_else(|_| row.try_get::<i32>("", column).map(i64::from))
        .or_else(|_| row.try_get::<i16>("", column).map(i64::from))
        .unwrap_or_else(|e| panic!("integer column `{column}`: {e}"))
}

/// The rows of outbox `table` matching `filter`, by aggregate and sequence.
async fn rows_of(db: &impl ConnectionTrait, table: &str, filter: &str) -> Vec<Row> {
    let payload = match db.get_database_backend() {
        DbBackend::Postgres => "payload::text",
        DbBackend::MySql => "CAST(payload AS CHAR)",
        _ => "payload",
    };
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            format!(
                "SELECT id, event_name, aggregate_type, aggregate_id, sequence, status, attempts, \
                 correlation_id, {payload} AS payload_text FROM {table} WHERE {filter} \
                 ORDER BY aggregate_type, aggregate_id, sequence"
            ),
        ))
        .await
        .unwrap();
    rows.iter()
        .map(|row| Row {
            id: row.try_get("", "id").unwrap(),
            event_name: row.try_get("", "event_name").unwrap(),
            aggregate_type: row.try_get("", "aggregate_type").unwrap(),
            aggregate_id: row.try_get("", "aggregate_id").unwrap(),
            sequence: int(row, "sequence"),
            status: int(row, "status"),
            attempts: int(row, "attempts"),
            correlation_id: row.try_get("", "correlation_id").unwrap(),
            payload: serde_json::from_str(&row.try_get::<String>("", "payload_text").unwrap())
                .unwrap(),
        })
        .collect()
}

async fn outbox_rows(test: &TestDb) -> Vec<Row> {
    rows_of(&test.db, "outbox_messages", "1=1").await
}

async fn outbox_count(test: &TestDb) -> i64 {
    test.count("outbox_messages", "1=1").await
}

async fn order_row(test: &TestDb, id: &str) -> Option<entity::Model> {
    entity::Entity::find_by_id(id).one(&test.db).await.unwrap()
}

async fn stored_version(test: &TestDb) -> i64 {
    order_row(test, "o-1").await.expect("order o-1").version
}

/// (event name, sequence) of every outbox row of order `id`.
async fn order_events(test: &TestDb, id: &str) -> Vec<(String, i64)> {
    rows_of(
        &test.db,
        "outbox_messages",
        &format!("aggregate_type = 'order' AND aggregate_id = '{id}'"),
    )
    .await
    .into_iter()
    .map(|r| (r.event_name, r.sequence))
    .collect()
}

/// Saves a new order `id` of 100 cents (its `placed` event with it).
async fn save_new(orders: &Repository<Order>, id: &str) {
    save_placed(orders, id, 100).await;
}

/// Saves a new order `id` of `total_cents` (its `placed` event with it).
async fn save_placed(orders: &Repository<Order>, id: &str, total_cents: i64) {
    orders
        .save(&mut Order::place(id, total_cents).unwrap())
        .await
        .unwrap();
}

/// Saves a new order `id`, loads it back and amends it to `total_cents`
/// (the amendment not saved yet).
async fn saved_then_amended(orders: &Repository<Order>, id: &str, total_cents: i64) -> Order {
    save_new(orders, id).await;
    let mut order = orders.load(id).await.unwrap().unwrap();
    order.amend(total_cents).unwrap();
    order
}

/// Asserts the database holds no order and no outbox row at all.
async fn assert_nothing_written(test: &TestDb) {
    assert_eq!(test.count("orders", "1=1").await, 0, "no order row");
    assert_eq!(outbox_count(test).await, 0, "no outbox row");
}

/// Asserts the database holds no order and no outbox row at all, and that
/// nothing was left locked: order `o-1` (7 cents) can be saved afterwards,
/// its event the only outbox row.
async fn assert_nothing_written_nor_locked(test: &TestDb, outbox: &Outbox) {
    assert_nothing_written(test).await;
    save_placed(&outbox.repository(), "o-1", 7).await;
    assert_eq!(outbox_count(test).await, 1);
}

/// A unit of work on `outbox` that saved new order `o-1` (100 cents) and
/// enqueued `Ping { n: 1 }`, not committed.
async fn order_and_ping(outbox: &Outbox) -> UnitOfWork {
    let mut uow = outbox.begin();
    let mut order = Order::place("o-1", 100).unwrap();
    uow.save(&mut order).await.unwrap();
    uow.enqueue(&Ping { n: 1 }).unwrap();
    uow
}

/// Runs `sql` on the unit of work's connection (inside its transaction).
async fn execute_in(uow: &mut UnitOfWork, sql: &str) -> Result<ExecResult, DbErr> {
    uow.connection()
        .await
        .unwrap()
        .execute_unprepared(sql)
        .await
}

/// Asserts order `o-1` was placed and amended once, to `total_cents`: at
/// version 2, with its `placed` and `amended` events in sequence.
async fn assert_placed_then_amended(test: &TestDb, total_cents: i64) {
    let stored = order_row(test, "o-1").await.unwrap();
    assert_eq!((stored.total_cents, stored.version), (total_cents, 2));
    assert_eq!(
        order_events(test, "o-1").await,
        [
            ("test.order.placed".to_owned(), 1),
            ("test.order.amended".to_owned(), 2)
        ]
    );
}

/// Asserts `result` is a concurrency conflict on order `id` at `expected`.
fn assert_conflict<T: std::fmt::Debug>(result: Result<T, OutboxError>, id: &str, expected: u64) {
    match result {
        Err(OutboxError::ConcurrencyConflict {
            aggregate_type,
            aggregate_id,
            expected_version,
        }) => assert_eq!(
            (aggregate_type, aggregate_id.as_str(), expected_version),
            ("order", id, expected)
        ),
        other => panic!("expected a concurrency conflict, got {other:?}"),
    }
}

async fn table_exists(test: &TestDb, table: &str) -> bool {
    let filter = match test.backend() {
        Backend::Postgres => format!("table_schema = current_schema() AND table_name = '{table}'"),
        Backend::MySql => format!("table_schema = DATABASE() AND table_name = '{table}'"),
        Backend::Sqlite => {
            return test
                .count(
                    "sqlite_master",
                    &format!("type = 'table' AND name = '{table}'"),
                )
                .await
                == 1;
        }
    };
    test.count("information_schema.tables", &filter).await == 1
}

fn postgres_url() -> String {
    std::env::var("OUTBOX_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

// ---------------------------------------------------------- 1. atomicity

/// A commit leaves the order row and its outbox rows, as pending messages.
async fn commit_writes_order_and_outbox_rows(test: TestDb) {
    let outbox = outbox(&test);
    let mut order = Order::place("o-1", 100).unwrap();
    order.amend(150).unwrap();
    let mut uow = outbox.begin();
    uow.save(&mut order).await.unwrap();
    assert_eq!(order.version(), 2, "the aggregate moved to its new version");
    assert!(order.events().pending().is_empty());
    let ids = uow.commit().await.unwrap();

    let stored = order_row(&test, "o-1").await.expect("order row");
    assert_eq!(
        (stored.status.as_str(), stored.total_cents, stored.version),
        ("placed", 150, 2)
    );
    let rows = outbox_rows(&test).await;
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows.iter()
            .map(|r| MessageId::from_uuid(r.id))
            .collect::<Vec<_>>(),
        ids,
        "commit returns the ids of the written rows, in order"
    );
    let expected = [
        (
            "test.order.placed",
            1,
            json!({"order_id": "o-1", "total_cents": 100}),
        ),
        (
            "test.order.amended",
            2,
            json!({"order_id": "o-1", "total_cents": 150}),
        ),
    ];
    for (row, (event_name, sequence, payload)) in rows.iter().zip(expected) {
        assert_eq!(row.event_name, event_name);
        assert_eq!(
            (row.aggregate_type.as_str(), row.aggregate_id.as_str()),
            ("order", "o-1")
        );
        assert_eq!(row.sequence, sequence);
        assert_eq!(
            (row.status, row.attempts),
            (0, 0),
            "pending, never attempted"
        );
        assert_eq!(row.payload, payload);
        assert_eq!(
            row.correlation_id,
            row.id.hyphenated().to_string(),
            "without a context each message is its own correlation root"
        );
    }
}

/// (a) A statement that fails after the aggregate row is written, then the
/// unit of work is dropped: neither the order nor its events remain, and the
/// same order can be saved afterwards (nothing left locked).
async fn failed_statement_then_drop_writes_nothing(test: TestDb) {
    let outbox = outbox(&test);
    let mut uow = outbox.begin();
    let mut order = Order::place("o-1", 100).unwrap();
    uow.save(&mut order).await.unwrap();
    let failed = execute_in(&mut uow, "INSERT INTO no_such_table (x) VALUES (1)").await;
    assert!(failed.is_err(), "the forced error must fail: {failed:?}");
    drop(uow);
    assert_nothing_written_nor_locked(&test, &outbox).await;
    assert_eq!(order_row(&test, "o-1").await.unwrap().total_cents, 7);
}

/// (b) A panic inside the unit of work (in a task): nothing is written.
async fn panic_inside_unit_of_work_writes_nothing(test: TestDb) {
    let outbox = outbox(&test);
    let task = tokio::spawn({
        let outbox = outbox.clone();
        async move {
            let _uow = order_and_ping(&outbox).await;
            panic!("the handler panics before committing");
        }
    });
    let joined = task.await;
    assert!(joined.unwrap_err().is_panic());
    assert_nothing_written_nor_locked(&test, &outbox).await;
}

/// (c) A unit of work dropped without commit writes nothing.
async fn dropped_unit_of_work_writes_nothing(test: TestDb) {
    let outbox = outbox(&test);
    {
        let _uow = order_and_ping(&outbox).await;
        // dropped here
    }
    assert_nothing_written_nor_locked(&test, &outbox).await;
}

/// (d) An explicit rollback writes nothing.
async fn rollback_writes_nothing(test: TestDb) {
    let outbox = outbox(&test);
    let uow = order_and_ping(&outbox).await;
    uow.rollback().await.unwrap();
    assert_nothing_written_nor_locked(&test, &outbox).await;
}

// ------------------------------------- 2. the application's own statements

/// Statements the application runs on `uow.connection()` commit and roll
/// back with the aggregates and the outbox rows.
async fn application_statements_share_the_transaction(test: TestDb) {
    let outbox = outbox(&test);

    let mut uow = outbox.begin();
    entity::ActiveModel {
        id: Set("app-1".into()),
        status: Set("imported".into()),
        total_cents: Set(5),
        version: Set(0),
    }
    .insert(uow.connection().await.unwrap())
    .await
    .unwrap();
    let seen = uow
        .load::<Order>("app-1")
        .await
        .unwrap()
        .expect("own write");
    assert_eq!((seen.total_cents, seen.version()), (5, 0));
    uow.save(&mut Order::place("o-1", 100).unwrap())
        .await
        .unwrap();
    assert!(
        order_row(&test, "app-1").await.is_none(),
        "not visible outside before commit"
    );
    uow.commit().await.unwrap();
    assert_eq!(order_row(&test, "app-1").await.unwrap().total_cents, 5);
    assert_eq!(order_row(&test, "o-1").await.unwrap().total_cents, 100);
    assert_eq!(outbox_count(&test).await, 1);

    let mut uow = outbox.begin();
    let updated = entity::Entity::update_many()
        .col_expr(entity::Column::TotalCents, Expr::value(999_i64))
        .filter(entity::Column::Id.eq("app-1"))
        .exec(uow.connection().await.unwrap())
        .await
        .unwrap();
    assert_eq!(updated.rows_affected, 1);
    let mut order = uow.load::<Order>("o-1").await.unwrap().unwrap();
    order.amend(200).unwrap();
    uow.save(&mut order).await.unwrap();
    uow.enqueue(&Ping { n: 1 }).unwrap();
    uow.rollback().await.unwrap();

    assert_eq!(order_row(&test, "app-1").await.unwrap().total_cents, 5);
    let o1 = order_row(&test, "o-1").await.unwrap();
    assert_eq!((o1.total_cents, o1.version), (100, 1));
    assert_eq!(outbox_count(&test).await, 1);
}

// ------------------------------------------- 3. optimistic concurrency

/// Two copies loaded independently: the first save wins, the second is a
/// conflict that writes nothing and leaves its copy as it was.
async fn stale_save_is_a_conflict(test: TestDb) {
    let outbox = outbox(&test);
    let orders = outbox.repository::<Order>();
    save_new(&orders, "o-1").await;
    let mut first = orders.load("o-1").await.unwrap().unwrap();
    let mut second = orders.load("o-1").await.unwrap().unwrap();
    let mut third = orders.load("o-1").await.unwrap().unwrap();
    let mut fourth = orders.load("o-1").await.unwrap().unwrap();
    let mut fifth = orders.load("o-1").await.unwrap().unwrap();
    first.amend(200).unwrap();
    second.amend(300).unwrap();

    orders.save(&mut first).await.unwrap();
    let before = outbox_count(&test).await;
    assert_conflict(orders.save(&mut second).await, "o-1", 1);

    let stored = order_row(&test, "o-1").await.unwrap();
    assert_eq!((stored.total_cents, stored.version), (200, 2));
    assert_eq!(outbox_count(&test).await, before);
    assert_eq!(
        order_events(&test, "o-1").await,
        [
            ("test.order.placed".to_owned(), 1),
            ("test.order.amended".to_owned(), 2)
        ]
    );
    assert_eq!(
        (second.version(), second.events().pending().len()),
        (1, 1),
        "a conflicting save leaves the aggregate as it was"
    );

    // Same through a unit of work: with no transaction open the save is
    // written by the commit (one statement on PostgreSQL), which reports it;
    // with one open, the save itself does.
    third.amend(400).unwrap();
    let mut uow = outbox.begin();
    uow.save(&mut third).await.unwrap();
    uow.enqueue(&Ping { n: 1 }).unwrap();
    assert_conflict(uow.commit().await, "o-1", 1);
    fourth.amend(500).unwrap();
    let mut uow = outbox.begin();
    uow.connection().await.unwrap();
    assert_conflict(uow.save(&mut fourth).await, "o-1", 1);
    drop(uow);
    // A state change without events: nothing gates it, the update's miss
    // is still reported.
    fifth.total_cents = 600;
    let mut uow = outbox.begin();
    uow.save(&mut fifth).await.unwrap();
    assert_conflict(uow.commit().await, "o-1", 1);
    assert_eq!(order_row(&test, "o-1").await.unwrap().total_cents, 200);
    assert_eq!(outbox_count(&test).await, before);
}

/// Two tasks save their own copy at the same moment: exactly one wins.
async fn concurrent_saves_one_wins(test: TestDb) {
    let outbox = outbox(&test);
    let orders = outbox.repository::<Order>();
    save_new(&orders, "o-1").await;
    let mut copies = Vec::new();
    for total in [200_i64, 300] {
        let mut order = orders.load("o-1").await.unwrap().unwrap();
        order.amend(total).unwrap();
        copies.push(order);
    }
    let winners = race(&outbox, copies, 1).await;
    let stored = order_row(&test, "o-1").await.unwrap();
    assert_eq!((stored.total_cents, stored.version), (winners[0], 2));
    assert_eq!(outbox_count(&test).await, 2);
}

/// Saves each copy of order `o-1` in its own task, all released at once by a
/// barrier; exactly one must win and the others must conflict at
/// `expected_version`. Returns the winners' totals (one).
async fn race(outbox: &Outbox, copies: Vec<Order>, expected_version: u64) -> Vec<i64> {
    let barrier = Arc::new(Barrier::new(copies.len()));
    let tasks: Vec<_> = copies
        .into_iter()
        .map(|mut order| {
            let (outbox, barrier) = (outbox.clone(), Arc::clone(&barrier));
            tokio::spawn(async move {
                let mut uow = outbox.begin();
                barrier.wait().await;
                let saved = match uow.save(&mut order).await {
                    Ok(()) => uow.commit().await.map(|_| ()),
                    Err(err) => Err(err),
                };
                (order.total_cents, saved)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        let (total, saved) = task.await.unwrap();
        match saved {
            Ok(()) => winners.push(total),
            conflict => assert_conflict(conflict, "o-1", expected_version),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one save wins: {winners:?}");
    winners
}

/// Creating an aggregate id that already exists is a conflict.
async fn creating_an_existing_id_is_a_conflict(test: TestDb) {
    let outbox = outbox(&test);
    let orders = outbox.repository::<Order>();
    save_new(&orders, "o-1").await;
    let mut again = Order::place("o-1", 500).unwrap();
    assert_conflict(orders.save(&mut again).await, "o-1", 0);
    let stored = order_row(&test, "o-1").await.unwrap();
    assert_eq!((stored.total_cents, stored.version), (100, 1));
    assert_eq!(outbox_count(&test).await, 1);
    assert_eq!(again.events().pending().len(), 1);
}

/// Two tasks create the same id at the same moment: exactly one wins.
async fn concurrent_creates_one_wins(test: TestDb) {
    let outbox = outbox(&test);
    let copies = [100_i64, 200].map(|total| Order::place("o-1", total).unwrap());
    let winners = race(&outbox, copies.into(), 0).await;
    let stored = order_row(&test, "o-1").await.unwrap();
    assert_eq!((stored.total_cents, stored.version), (winners[0], 1));
    assert_eq!(outbox_count(&test).await, 1);
}

// ------------------------------------------------ 4. versions and deletes

/// Sequence numbers follow the version; a save without events still moves
/// the version by one.
async fn sequences_follow_the_version(test: TestDb) {
    let outbox = outbox(&test);
    let orders = outbox.repository::<Order>();

    let mut order = Order::place("o-1", 100).unwrap();
    orders.save(&mut order).await.unwrap();
    assert_eq!((order.version(), stored_version(&test).await), (1, 1));

    let mut order = orders.load("o-1").await.unwrap().unwrap();
    assert_eq!(order.version(), 1);
    order.amend(110).unwrap();
    order.amend(120).unwrap();
    orders.save(&mut order).await.unwrap();
    assert_eq!((order.version(), stored_version(&test).await), (3, 3));

    let mut order = orders.load("o-1").await.unwrap().unwrap();
    order.amend(130).unwrap();
    orders.save(&mut order).await.unwrap();
    assert_eq!((order.version(), stored_version(&test).await), (4, 4));

    let mut order = orders.load("o-1").await.unwrap().unwrap();
    orders.save(&mut order).await.unwrap();
    assert_eq!(
        (order.version(), stored_version(&test).await),
        (5, 5),
        "a save without events still moves the version"
    );

    // Sequences may skip (5 belongs to no message) but never go back.
    let mut order = orders.load("o-1").await.unwrap().unwrap();
    order.amend(140).unwrap();
    orders.save(&mut order).await.unwrap();
    assert_eq!(stored_version(&test).await, 6);

    let rows = outbox_rows(&test).await;
    let seen: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.event_name.as_str(),
                r.sequence,
                r.payload["total_cents"].clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("test.order.placed", 1, json!(100)),
            ("test.order.amended", 2, json!(110)),
            ("test.order.amended", 3, json!(120)),
            ("test.order.amended", 4, json!(130)),
            ("test.order.amended", 6, json!(140)),
        ]
    );
    assert_eq!(order_row(&test, "o-1").await.unwrap().total_cents, 140);
}

/// Saving one aggregate twice in one unit of work continues its sequence.
async fn two_saves_in_one_unit_of_work(test: TestDb) {
    let outbox = outbox(&test);
    let mut uow = outbox.begin();
    let mut order = Order::place("o-1", 100).unwrap();
    uow.save(&mut order).await.unwrap();
    order.amend(200).unwrap();
    uow.save(&mut order).await.unwrap();
    uow.commit().await.unwrap();
    assert_placed_then_amended(&test, 200).await;
}

/// A unit of work opens no transaction for a save: the commit writes the
/// aggregate and its events, in one statement on PostgreSQL (two on the
/// others, inside a transaction). A load after a save opens the transaction
/// and sees the save.
async fn save_is_written_by_the_commit(test: TestDb) {
    let mut db = test.connect_again().await;
    let sent = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&sent);
    db.set_metric_callback(move |info| log.lock().unwrap().push(info.statement.sql.clone()));
    let outbox = Outbox::new(db, OutboxConfig::default());

    let mut uow = outbox.begin();
    let mut order = Order::place("o-1", 100).unwrap();
    order.amend(120).unwrap();
    uow.save(&mut order).await.unwrap();
    uow.enqueue(&Ping { n: 1 }).unwrap();
    assert!(
        sent.lock().unwrap().is_empty(),
        "nothing sent before commit"
    );
    assert!(order_row(&test, "o-1").await.is_none());
    uow.commit().await.unwrap();
    let statements = std::mem::take(&mut *sent.lock().unwrap());
    match test.backend() {
        Backend::Postgres => {
            assert_eq!(statements.len(), 1, "{statements:#?}");
            assert!(statements[0].starts_with("WITH aggregate_written AS (INSERT INTO"));
        }
        _ => assert_eq!(statements.len(), 2, "{statements:#?}"),
    }
    assert_eq!(order_row(&test, "o-1").await.unwrap().version, 2);
    assert_eq!(outbox_count(&test).await, 3);

    let mut uow = outbox.begin();
    uow.save(&mut Order::place("o-2", 5).unwrap())
        .await
        .unwrap();
    let seen = uow.load::<Order>("o-2").await.unwrap();
    assert_eq!(
        seen.map(|o| o.total_cents),
        Some(5),
        "the load sees the save"
    );
    assert!(order_row(&test, "o-2").await.is_none(), "not committed yet");
    uow.commit().await.unwrap();
    assert!(order_row(&test, "o-2").await.is_some());
}

/// An aggregate deleted and created again under its old id starts its
/// sequences at 1 again, which its old messages hold: the commit fails as a
/// database error (reloading would not help), and writes nothing, also when
/// the aggregate and its events go in one statement.
async fn recreating_a_deleted_aggregate_writes_nothing(test: TestDb) {
    let outbox = outbox(&test);
    let orders = outbox.repository::<Order>();
    let mut order = saved_then_amended(&orders, "o-1", 0).await;
    orders.delete(&mut order).await.unwrap();
    let before = outbox_count(&test).await;

    let mut again = Order::place("o-1", 7).unwrap();
    let err = orders.save(&mut again).await.unwrap_err();
    assert!(matches!(err, OutboxError::Db(_)), "{err:?}");
    assert!(order_row(&test, "o-1").await.is_none(), "no order row");
    assert_eq!(outbox_count(&test).await, before, "no message");
    assert_eq!(
        again.events().pending().len(),
        1,
        "the aggregate is as it was"
    );
}

/// `delete` removes the row under a version check and writes the events
/// the aggregate recorded; a stale delete is a conflict and changes nothing.
async fn delete_checks_the_version_and_writes_events(test: TestDb) {
    let outbox = outbox(&test);
    let orders = outbox.repository::<Order>();
    save_new(&orders, "o-1").await;
    save_new(&orders, "o-2").await;

    let mut order = orders.load("o-1").await.unwrap().unwrap();
    order.amend(0).unwrap(); // the "archived" event
    let mut uow = outbox.begin();
    uow.delete(&mut order).await.unwrap();
    uow.commit().await.unwrap();
    assert!(order_row(&test, "o-1").await.is_none());
    assert_eq!(
        order_events(&test, "o-1").await,
        [
            ("test.order.placed".to_owned(), 1),
            ("test.order.amended".to_owned(), 2)
        ]
    );

    // Deleting the already-deleted order again is a conflict too.
    let mut ghost = Order::place("o-1", 0).unwrap();
    *ghost.events_mut() = txoutbox_core::EventBuffer::at_version(2);
    assert_conflict(orders.delete(&mut ghost).await, "o-1", 2);

    // A stale copy of o-2.
    let mut fresh = orders.load("o-2").await.unwrap().unwrap();
    let mut stale = orders.load("o-2").await.unwrap().unwrap();
    fresh.amend(250).unwrap();
    orders.save(&mut fresh).await.unwrap();
    let before = outbox_count(&test).await;
    stale.amend(0).unwrap();
    assert_conflict(orders.delete(&mut stale).await, "o-2", 1);
    let stored = order_row(&test, "o-2").await.expect("still there");
    assert_eq!((stored.total_cents, stored.version), (250, 2));
    assert_eq!(outbox_count(&test).await, before);

    // The fresh copy deletes fine, with no events of its own.
    orders.delete(&mut fresh).await.unwrap();
    assert!(order_row(&test, "o-2").await.is_none());
    assert_eq!(outbox_count(&test).await, before);
}

// ---------------------------------------------------------- 5. enqueue

/// `UnitOfWork::enqueue` writes a standalone message: its own ordering
/// group (aggregate id = message id, sequence 1).
async fn uow_enqueue_writes_a_standalone_message(test: TestDb) {
    let outbox = outbox(&test);
    let mut uow = outbox.begin();
    let first = uow.enqueue(&Ping { n: 1 }).unwrap();
    let second = uow.enqueue(&Ping { n: 2 }).unwrap();
    assert_eq!(uow.commit().await.unwrap(), [first, second]);

    let rows = rows_of(&test.db, "outbox_messages", "1=1").await;
    assert_eq!(rows.len(), 2);
    for (id, n) in [(first, 1), (second, 2)] {
        let row = rows
            .iter()
            .find(|r| MessageId::from_uuid(r.id) == id)
            .expect("row of the message");
        assert_eq!(row.aggregate_type, STANDALONE);
        assert_eq!(row.aggregate_id, id.to_string());
        assert_eq!(row.sequence, 1);
        assert_eq!(row.event_name, "test.uow.ping");
        assert_eq!((row.status, row.attempts), (0, 0));
        assert_eq!(row.payload, json!({ "n": n }));
    }
}

/// `Outbox::enqueue` on a transaction the application owns commits and
/// rolls back with it.
async fn outbox_enqueue_follows_the_application_transaction(test: TestDb) {
    let outbox = outbox(&test);
    let context = MessageContext::new().with_correlation_id("req-1");

    let txn = test.db.begin().await.unwrap();
    entity::ActiveModel {
        id: Set("app-1".into()),
        status: Set("imported".into()),
        total_cents: Set(5),
        version: Set(0),
    }
    .insert(&txn)
    .await
    .unwrap();
    let committed = outbox
        .enqueue(&txn, &Ping { n: 1 }, &context)
        .await
        .unwrap();
    assert_eq!(outbox_count(&test).await, 0, "invisible before commit");
    txn.commit().await.unwrap();
    outbox.wake();

    let rows = outbox_rows(&test).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(MessageId::from_uuid(rows[0].id), committed);
    assert_eq!(
        (
            rows[0].aggregate_type.as_str(),
            rows[0].aggregate_id.as_str(),
            rows[0].sequence
        ),
        (STANDALONE, committed.to_string().as_str(), 1)
    );
    assert_eq!(rows[0].correlation_id, "req-1");
    assert!(order_row(&test, "app-1").await.is_some());

    let txn = test.db.begin().await.unwrap();
    let rolled_back = outbox
        .enqueue(&txn, &Ping { n: 2 }, &context)
        .await
        .unwrap();
    txn.rollback().await.unwrap();
    assert_ne!(rolled_back, committed);
    assert_eq!(outbox_count(&test).await, 1);
    assert_eq!(
        MessageId::from_uuid(outbox_rows(&test).await[0].id),
        committed
    );
}

// ------------------------------------------------------ 6. bad input

/// An aggregate id longer than the column is an `InvalidMessage` at commit;
/// nothing is written and no listener is woken.
async fn over_long_aggregate_id_is_invalid(test: TestDb) {
    if test.backend() == Backend::MySql {
        // The fixture's `orders.id` is VARCHAR(64) there: widen it so the
        // outbox's own check is what refuses the id.
        test.db
            .execute_unprepared("ALTER TABLE orders MODIFY id VARCHAR(300) NOT NULL")
            .await
            .unwrap();
    }
    let outbox = outbox(&test);
    let mut listener = outbox.listen();
    let long_id = "x".repeat(256);

    let mut uow = outbox.begin();
    let mut order = Order::place(long_id.clone(), 100).unwrap();
    uow.save(&mut order).await.unwrap();
    let err = uow.commit().await.unwrap_err();
    match &err {
        OutboxError::InvalidMessage { reason, .. } => {
            assert!(reason.contains("aggregate id"), "{reason}")
        }
        other => panic!("expected InvalidMessage, got {other:?}"),
    }
    assert_nothing_written(&test).await;

    // Same through the repository.
    let mut order = Order::place(long_id, 100).unwrap();
    let err = outbox.repository::<Order>().save(&mut order).await;
    assert!(
        matches!(err, Err(OutboxError::InvalidMessage { .. })),
        "{err:?}"
    );
    assert_eq!(
        (order.version(), order.events().pending().len()),
        (0, 1),
        "a failed save leaves the aggregate as it was"
    );
    assert_nothing_written(&test).await;

    // A 255-byte id is fine.
    let mut order = Order::place("y".repeat(255), 100).unwrap();
    outbox.repository::<Order>().save(&mut order).await.unwrap();
    assert_eq!(outbox_count(&test).await, 1);

    // Over-long context values are refused the same way by `Outbox::enqueue`.
    let txn = test.db.begin().await.unwrap();
    let context = MessageContext::new().with_tenant("t".repeat(256));
    let err = outbox.enqueue(&txn, &Ping { n: 1 }, &context).await;
    assert!(
        matches!(err, Err(OutboxError::InvalidMessage { .. })),
        "{err:?}"
    );
    txn.commit().await.unwrap();
    assert_eq!(outbox_count(&test).await, 1);

    // Only the successful commit woke the listener.
    let Ok(Some(CommitEvent::Committed(messages))) =
        timeout(Duration::from_secs(5), listener.recv()).await
    else {
        panic!("the successful commit wakes the listener");
    };
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].aggregate_id, "y".repeat(255));
    assert!(
        timeout(Duration::from_millis(200), listener.recv())
            .await
            .is_err()
    );
}

/// A repository save that fails at commit leaves the aggregate at its
/// loaded version with its events, so it can be saved again.
async fn failed_commit_leaves_the_aggregate_for_a_retry(test: TestDb) {
    let outbox = outbox(&test);
    let orders = outbox.repository::<Order>();
    let mut order = saved_then_amended(&orders, "o-1", 200).await;
    let too_long = MessageContext::new().with_correlation_id("c".repeat(256));
    let err = orders.save_with(&mut order, too_long).await;
    assert!(
        matches!(err, Err(OutboxError::InvalidMessage { .. })),
        "{err:?}"
    );
    assert_eq!((order.version(), order.events().pending().len()), (1, 1));
    let stored = order_row(&test, "o-1").await.unwrap();
    assert_eq!((stored.total_cents, stored.version), (100, 1));
    assert_eq!(outbox_count(&test).await, 1);

    orders.save(&mut order).await.unwrap();
    assert_eq!(order.version(), 2);
    assert_placed_then_amended(&test, 200).await;
}

/// A closed pool gives `OutboxError::Db` everywhere, and writes nothing.
async fn closed_connection_is_a_db_error(test: TestDb) {
    let db = test.connect_again().await;
    db.clone().close().await.unwrap();
    let outbox = Outbox::new(db, OutboxConfig::default());
    let orders = outbox.repository::<Order>();

    // Beginning sends nothing; the first statement fails.
    let mut uow = outbox.begin();
    let opened = uow.connection().await.map(|_| ());
    assert!(matches!(opened, Err(OutboxError::Db(_))), "{opened:?}");
    let mut uow = outbox.begin();
    uow.save(&mut Order::place("o-0", 1).unwrap())
        .await
        .unwrap();
    let committed = uow.commit().await;
    assert!(
        matches!(committed, Err(OutboxError::Db(_))),
        "{committed:?}"
    );
    let mut order = Order::place("o-1", 100).unwrap();
    let saved = orders.save(&mut order).await;
    assert!(matches!(saved, Err(OutboxError::Db(_))), "{saved:?}");
    assert_eq!(
        (order.version(), order.events().pending().len()),
        (0, 1),
        "a failed save leaves the aggregate as it was"
    );
    let loaded = orders.load("o-1").await;
    assert!(matches!(loaded, Err(OutboxError::Db(_))), "{loaded:?}");
    let enqueued = outbox
        .enqueue(outbox.db(), &Ping { n: 1 }, &MessageContext::new())
        .await;
    assert!(matches!(enqueued, Err(OutboxError::Db(_))), "{enqueued:?}");
    assert_nothing_written(&test).await;
}

/// An event serde cannot serialize is refused where it is recorded.
async fn unserializable_event_fails_at_record(test: TestDb) {
    let outbox = outbox(&test);
    let bad = Unserializable {
        cells: HashMap::from([((1, 2), 3)]),
    };

    let mut order = Order::place("o-1", 100).unwrap();
    match order.record(bad.clone()) {
        Err(RecordError::Serialize { event_name, .. }) => {
            assert_eq!(event_name, "test.uow.unserializable")
        }
        other => panic!("expected a serialization error, got {other:?}"),
    }
    assert_eq!(order.events().pending().len(), 1, "nothing pending for it");

    let mut uow = outbox.begin();
    let err = uow.enqueue(&bad);
    assert!(
        matches!(err, Err(OutboxError::Record(RecordError::Serialize { .. }))),
        "{err:?}"
    );
    let context = uow.context().clone();
    let err = outbox
        .enqueue(uow.connection().await.unwrap(), &bad, &context)
        .await;
    assert!(
        matches!(err, Err(OutboxError::Record(RecordError::Serialize { .. }))),
        "{err:?}"
    );
    uow.save(&mut order).await.unwrap();
    let ids = uow.commit().await.unwrap();
    assert_eq!(ids.len(), 1);
    let rows = outbox_rows(&test).await;
    assert_eq!(
        rows.iter()
            .map(|r| r.event_name.as_str())
            .collect::<Vec<_>>(),
        ["test.order.placed"]
    );
}

/// The context stamped by `begin_with` survives the table: what a claim
/// returns equals what the unit of work sealed (and handed to listeners).
async fn message_context_round_trips(test: TestDb) {
    let outbox = outbox(&test);
    let mut listener = outbox.listen();
    let context = MessageContext::new()
        .with_correlation_id("req-42")
        .with_causation_id("cmd-7")
        .with_tenant("acme")
        .with_traceparent(TRACEPARENT.parse().unwrap())
        .with_header("x-region", "eu")
        .unwrap()
        .with_header("x-shared", "from-context")
        .unwrap();

    let mut order = Order::place("o-1", 100).unwrap();
    order.events_mut().record_message(
        PendingMessage::new(&OrderAmended {
            order_id: "o-1".into(),
            total_cents: 150,
        })
        .unwrap()
        .with_header("x-shared", "from-message")
        .unwrap()
        .with_header("x-own", "1")
        .unwrap(),
    );
    let mut uow = outbox.begin_with(context.clone());
    assert_eq!(uow.context(), &context);
    uow.save(&mut order).await.unwrap();
    uow.enqueue(&Ping { n: 1 }).unwrap();
    let ids = uow.commit().await.unwrap();

    // A second unit of work with an empty context: NULLs round-trip too.
    let mut plain = outbox.begin();
    let plain_id = plain.enqueue(&Ping { n: 2 }).unwrap();
    plain.commit().await.unwrap();

    let mut sealed: Vec<OutboxMessage> = Vec::new();
    for _ in 0..2 {
        match timeout(Duration::from_secs(5), listener.recv()).await {
            Ok(Some(CommitEvent::Committed(messages))) => sealed.extend(messages.iter().cloned()),
            other => panic!("expected a commit, got {other:?}"),
        }
    }
    assert_eq!(
        sealed.iter().map(|m| m.id).collect::<Vec<_>>(),
        [ids.as_slice(), &[plain_id]].concat()
    );

    // What was sealed carries the context.
    for message in &sealed[..3] {
        assert_eq!(message.correlation_id, "req-42");
        assert_eq!(message.causation_id.as_deref(), Some("cmd-7"));
        assert_eq!(message.tenant.as_deref(), Some("acme"));
        assert_eq!(
            message.traceparent.as_ref().map(|t| t.as_str()),
            Some(TRACEPARENT)
        );
        assert_eq!(message.headers.get("x-region"), Some("eu"));
    }
    assert_eq!(sealed[0].headers.get("x-shared"), Some("from-context"));
    assert_eq!(sealed[1].headers.get("x-shared"), Some("from-message"));
    assert_eq!(sealed[1].headers.get("x-own"), Some("1"));
    assert_eq!(sealed[0].headers.get("x-own"), None);
    assert_eq!(sealed[3].correlation_id, plain_id.to_string());
    assert_eq!(
        (
            &sealed[3].causation_id,
            &sealed[3].tenant,
            &sealed[3].traceparent
        ),
        (&None, &None, &None)
    );
    assert!(sealed[3].headers.is_empty());

    let store = SeaOrmOutboxStore::new(test.db.clone(), OutboxConfig::default());
    let batch = store.claim(10, Duration::from_secs(30)).await.unwrap();
    let mut claimed: Vec<OutboxMessage> = batch.messages.into_iter().map(|c| c.message).collect();
    claimed.sort_by_key(|m| m.id);
    sealed.sort_by_key(|m| m.id);
    let canonical = |messages: Vec<OutboxMessage>| {
        messages
            .into_iter()
            .map(txoutbox_suite::canonical)
            .collect::<Vec<_>>()
    };
    assert_eq!(canonical(claimed), canonical(sealed));
}

// ------------------------------------------------------ 7. migrations

/// The storage settings migration `m20261128_000008` gives the outbox and
/// inbox tables on PostgreSQL, as `pg_class.reloptions` lists them.
const QUEUE_STORAGE: &str = "autovacuum_vacuum_scale_factor=0.02,\
     autovacuum_vacuum_threshold=1000,autovacuum_analyze_scale_factor=0.02";

/// A PostgreSQL table's storage settings (`pg_class.reloptions`, joined
/// by commas; empty: the defaults), in the test's schema.
async fn reloptions(test: &TestDb, table: &str) -> String {
    let rows = test
        .rows(&format!(
            "SELECT coalesce(array_to_string(c.reloptions, ','), '') AS options FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relname = '{table}' AND n.nspname = current_schema()"
        ))
        .await;
    rows[0].try_get("", "options").unwrap()
}

/// `OutboxMigrator` creates the table with its own history table, once.
async fn outbox_migrator_creates_the_table(backend: Backend) {
    let test = TestDb::new(backend).await;
    assert!(!table_exists(&test, "outbox_messages").await);
    OutboxMigrator::up(&test.db, None).await.unwrap();
    assert!(table_exists(&test, "outbox_messages").await);
    assert!(table_exists(&test, "outbox_inbox").await);
    assert!(table_exists(&test, "outbox_inbox_held").await);
    assert!(table_exists(&test, "outbox_inbox_lease").await);
    assert_eq!(
        test.count("outbox_migrations", "1=1").await,
        8,
        "the outbox table, the inbox table, the queue indexes (claim walk, dead count), \
         the abandoned claims, the held messages, the skipped messages, the reader leases, \
         the storage settings"
    );
    if backend == Backend::Postgres {
        assert_eq!(
            reloptions(&test, "outbox_messages").await,
            QUEUE_STORAGE,
            "autovacuum and analyze for a queue table"
        );
        assert_eq!(reloptions(&test, "outbox_inbox").await, QUEUE_STORAGE);
    }
    assert!(
        !table_exists(&test, "seaql_migrations").await,
        "the application's history table is left alone"
    );
    if backend == Backend::MySql {
        let index = |name: &str| {
            format!(
                "table_schema = DATABASE() AND table_name = 'outbox_messages' AND index_name = '{name}'"
            )
        };
        assert_eq!(
            test.count(
                "information_schema.statistics",
                &index("outbox_messages_heads")
            )
            .await,
            4,
            "the heads index: (status, aggregate_type, aggregate_id, sequence)"
        );
        assert_eq!(
            test.count(
                "information_schema.statistics",
                &index("outbox_messages_unpublished")
            )
            .await,
            0,
            "the heads index replaces the first schema's unpublished index"
        );
    }

    txoutbox_suite::orders::create_table(&test.db)
        .await
        .unwrap();
    let outbox = outbox(&test);
    save_new(&outbox.repository(), "o-1").await;
    assert_eq!(outbox_count(&test).await, 1);

    OutboxMigrator::up(&test.db, None).await.unwrap();
    assert_eq!(test.count("outbox_migrations", "1=1").await, 8);
    assert_eq!(outbox_count(&test).await, 1, "running up again is a no-op");
    if backend == Backend::Postgres {
        // The last migration undone: PostgreSQL's defaults again.
        OutboxMigrator::down(&test.db, Some(1)).await.unwrap();
        assert_eq!(reloptions(&test, "outbox_messages").await, "");
        assert_eq!(reloptions(&test, "outbox_inbox").await, "");
        OutboxMigrator::up(&test.db, None).await.unwrap();
        assert_eq!(reloptions(&test, "outbox_messages").await, QUEUE_STORAGE);
    }
    assert!(
        OutboxMigrator::get_pending_migrations(&test.db)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A database whose tables `create_schema` built (the latest schema at
/// once) moves to migrations: every migration finds its change made and is
/// recorded without repeating it (MySQL/MariaDB and SQLite have no
/// `IF NOT EXISTS` for every statement), and the data stays.
async fn migrations_after_create_schema_find_every_change_made(test: TestDb) {
    let outbox = outbox(&test);
    save_new(&outbox.repository(), "o-1").await;
    OutboxMigrator::up(&test.db, None).await.unwrap();
    assert_eq!(test.count("outbox_migrations", "1=1").await, 8);
    if test.backend() == Backend::Postgres {
        assert_eq!(
            reloptions(&test, "outbox_messages").await,
            QUEUE_STORAGE,
            "create_schema builds the latest schema, its storage settings included"
        );
    }
    assert!(
        OutboxMigrator::get_pending_migrations(&test.db)
            .await
            .unwrap()
            .is_empty()
    );
    save_new(&outbox.repository(), "o-2").await;
    assert_eq!(outbox_count(&test).await, 2, "the data stays, writes go on");
}

/// The application's `orders` table, as the application's own migration.
struct CreateOrders;

impl sea_orm_migration::MigrationName for CreateOrders {
    fn name(&self) -> &str {
        "m20261201_000001_create_orders"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for CreateOrders {
    async fn up(&self, manager: &sea_orm_migration::SchemaManager) -> Result<(), sea_orm::DbErr> {
        txoutbox_suite::orders::create_table(manager.get_connection()).await
    }

    async fn down(&self, manager: &sea_orm_migration::SchemaManager) -> Result<(), sea_orm::DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DROP TABLE orders")
            .await
            .map(|_| ())
    }
}

fn custom_config() -> OutboxConfig {
    OutboxConfig::default()
        .with_table("custom_outbox")
        .unwrap()
        .with_inbox_table("custom_inbox")
        .unwrap()
}

/// An application's own migrator (default history table) that includes the
/// outbox's migrations for a custom table.
struct AppMigrator;

#[sea_orm_migration::async_trait::async_trait]
impl MigratorTrait for AppMigrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        let mut migrations: Vec<Box<dyn MigrationTrait>> = vec![Box::new(CreateOrders)];
        migrations.extend(txoutbox_sea_orm::migration::migrations(&custom_config()));
        migrations
    }
}

/// The outbox's migrations inside the application's migrator.
async fn application_migrator_creates_a_custom_table(backend: Backend) {
    let test = TestDb::new(backend).await;
    AppMigrator::up(&test.db, None).await.unwrap();
    assert!(table_exists(&test, "custom_outbox").await);
    assert!(table_exists(&test, "custom_inbox").await);
    assert!(table_exists(&test, "custom_inbox_held").await);
    assert!(table_exists(&test, "custom_inbox_lease").await);
    assert!(!table_exists(&test, "outbox_messages").await);
    assert!(!table_exists(&test, "outbox_inbox").await);
    assert!(!table_exists(&test, "outbox_migrations").await);
    assert_eq!(
        test.count("seaql_migrations", "1=1").await,
        9,
        "orders, then the outbox, the inbox, the queue indexes (claim walk, dead count), \
         the abandoned claims, the held messages, the skipped messages, the reader leases \
         and the storage settings"
    );
    if backend == Backend::Postgres {
        assert_eq!(reloptions(&test, "custom_outbox").await, QUEUE_STORAGE);
        assert_eq!(reloptions(&test, "custom_inbox").await, QUEUE_STORAGE);
    }

    let outbox = Outbox::new(test.db.clone(), custom_config());
    outbox
        .repository::<Order>()
        .save(&mut Order::place("o-1", 100).unwrap())
        .await
        .unwrap();
    let rows = rows_of(&test.db, "custom_outbox", "1=1").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].event_name, "test.order.placed");

    AppMigrator::up(&test.db, None).await.unwrap();
    assert_eq!(test.count("seaql_migrations", "1=1").await, 9);
    assert_eq!(test.count("custom_outbox", "1=1").await, 1);

    // The storage settings go first (on PostgreSQL the custom tables'
    // defaults again), then the reader leases, then the skipped columns, then the held
    // messages, then the abandoned claims column, then the heads index (on
    // MySQL/MariaDB the first schema's index comes back), then the inbox,
    // then the outbox.
    AppMigrator::down(&test.db, Some(1)).await.unwrap();
    if backend == Backend::Postgres {
        assert_eq!(reloptions(&test, "custom_outbox").await, "");
        assert_eq!(reloptions(&test, "custom_inbox").await, "");
    }
    assert!(table_exists(&test, "custom_inbox_lease").await);
    AppMigrator::down(&test.db, Some(1)).await.unwrap();
    assert!(!table_exists(&test, "custom_inbox_lease").await);
    let skipped_column = "SELECT skipped_at FROM custom_outbox";
    test.db.execute_unprepared(skipped_column).await.unwrap();
    AppMigrator::down(&test.db, Some(1)).await.unwrap();
    assert!(
        test.db.execute_unprepared(skipped_column).await.is_err(),
        "the skipped columns are gone"
    );
    assert!(table_exists(&test, "custom_inbox_held").await);
    assert_eq!(test.count("custom_outbox", "1=1").await, 1);
    AppMigrator::down(&test.db, Some(1)).await.unwrap();
    assert!(!table_exists(&test, "custom_inbox_held").await);
    AppMigrator::down(&test.db, Some(1)).await.unwrap();
    assert!(table_exists(&test, "custom_inbox").await);
    AppMigrator::down(&test.db, Some(1)).await.unwrap();
    assert!(table_exists(&test, "custom_inbox").await);
    AppMigrator::down(&test.db, Some(1)).await.unwrap();
    assert!(
        !table_exists(&test, "custom_inbox").await,
        "the inbox goes first"
    );
    assert!(table_exists(&test, "custom_outbox").await);
    AppMigrator::down(&test.db, Some(1)).await.unwrap();
    assert!(!table_exists(&test, "custom_outbox").await);
    assert!(table_exists(&test, "orders").await);
}

// ------------------------------------------------------ 8. wake-ups

/// Listeners receive exactly the committed messages, and nothing for units
/// of work that were rolled back, dropped, or had no messages.
async fn listeners_receive_exactly_committed_messages(test: TestDb) {
    let outbox = outbox(&test);
    let mut listener = outbox.listen();

    let mut uow = outbox.begin();
    uow.save(&mut Order::place("o-rolled-back", 1).unwrap())
        .await
        .unwrap();
    uow.rollback().await.unwrap();
    {
        let mut uow = outbox.begin();
        uow.save(&mut Order::place("o-dropped", 1).unwrap())
            .await
            .unwrap();
    }
    assert!(
        outbox.begin().commit().await.unwrap().is_empty(),
        "a commit without messages"
    );
    assert!(
        timeout(Duration::from_millis(200), listener.recv())
            .await
            .is_err(),
        "nothing was committed"
    );

    let mut uow = outbox.begin();
    let mut order = Order::place("o-1", 100).unwrap();
    order.amend(150).unwrap();
    uow.save(&mut order).await.unwrap();
    uow.enqueue(&Ping { n: 1 }).unwrap();
    let ids = uow.commit().await.unwrap();

    let Ok(Some(CommitEvent::Committed(messages))) =
        timeout(Duration::from_secs(5), listener.recv()).await
    else {
        panic!("the commit wakes the listener");
    };
    assert_eq!(messages.iter().map(|m| m.id).collect::<Vec<_>>(), ids);
    let owners: Vec<_> = messages
        .iter()
        .map(|m| (m.aggregate_type.as_str(), m.sequence))
        .collect();
    assert_eq!(owners, [("order", 1), ("order", 2), (STANDALONE, 1)]);
    assert!(
        timeout(Duration::from_millis(200), listener.recv())
            .await
            .is_err(),
        "one wake per commit"
    );
}

/// A PostgreSQL table of its own (NOTIFY channels are per database, and the
/// channel is the table's name), so parallel tests cannot add notifications.
async fn own_notify_table(test: &TestDb) -> (OutboxConfig, PgListener) {
    let table = format!("wake_outbox_{}", &Uuid::now_v7().simple().to_string()[20..]);
    let config = OutboxConfig::default().with_table(&table).unwrap();
    create_schema(&test.db, &config).await.unwrap();
    let mut listener = PgListener::connect(&postgres_url()).await.unwrap();
    listener.listen(&table).await.unwrap();
    (config, listener)
}

/// A commit sends a `NOTIFY` on the table's channel; a rollback does not.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_commit_notifies_other_processes() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    let (config, mut listener) = own_notify_table(&test).await;
    let channel = config.notify_channel().unwrap().to_owned();
    let outbox = Outbox::new(test.db.clone(), config);

    let mut uow = outbox.begin();
    uow.save(&mut Order::place("o-rolled-back", 1).unwrap())
        .await
        .unwrap();
    uow.rollback().await.unwrap();
    assert!(
        timeout(Duration::from_millis(300), listener.recv())
            .await
            .is_err(),
        "no NOTIFY for a rollback"
    );

    outbox
        .repository::<Order>()
        .save(&mut Order::place("o-1", 100).unwrap())
        .await
        .unwrap();
    let notification = timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("a NOTIFY after the commit")
        .unwrap();
    assert_eq!(notification.channel(), channel);
    // It names the committed message: "<origin> <id as 32 hex digits>".
    let table = &channel; // the channel is the table's name
    let id: Uuid = test
        .db
        .query_one_raw(Statement::from_string(
            test.db_backend(),
            format!("SELECT id FROM {table}"),
        ))
        .await
        .unwrap()
        .expect("the committed row")
        .try_get("", "id")
        .unwrap();
    let (_origin, ids) = notification
        .payload()
        .split_once(' ')
        .expect("the payload names the committed messages");
    assert_eq!(ids, id.simple().to_string());

    // `Outbox::wake` after the application's own commit.
    let txn = test.db.begin().await.unwrap();
    outbox
        .enqueue(&txn, &Ping { n: 1 }, &MessageContext::new())
        .await
        .unwrap();
    txn.commit().await.unwrap();
    outbox.wake();
    let notification = timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("a NOTIFY after wake()")
        .unwrap();
    assert_eq!(notification.channel(), channel);
    assert!(
        !notification.payload().contains(' '),
        "wake() names no messages (it does not know them): {:?}",
        notification.payload()
    );
}

/// While a processor built from the outbox exists, this process's commits
/// send no `NOTIFY`: that processor serves them itself (a processor elsewhere
/// would only find them leased). Once it is gone, they notify again.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_commits_served_by_a_local_processor_send_no_notify() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    let (config, mut listener) = own_notify_table(&test).await;
    let outbox = Outbox::new(test.db.clone(), config);
    let orders = outbox.repository::<Order>();

    let processor = outbox.processor(NeverRun);
    for i in 0..5 {
        orders
            .save(&mut Order::place(format!("o-{i}"), 1).unwrap())
            .await
            .unwrap();
    }
    assert!(
        timeout(Duration::from_millis(500), listener.recv())
            .await
            .is_err(),
        "no NOTIFY while a local processor serves the commits"
    );

    drop(processor);
    orders
        .save(&mut Order::place("o-after", 1).unwrap())
        .await
        .unwrap();
    timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("a NOTIFY once no local processor serves")
        .unwrap();
}

/// The publisher of a processor that is built and never run.
struct NeverRun;

impl txoutbox_core::Publisher for NeverRun {
    async fn publish(
        &self,
        message: &txoutbox_core::OutboxMessage,
    ) -> Result<txoutbox_core::publisher::PublishAck, txoutbox_core::PublishError> {
        panic!(
            "the processor is never run, yet it published {}",
            message.id
        )
    }
}

/// Many rapid commits are coalesced into far fewer notifications.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_notifications_are_coalesced() {
    const TASKS: u32 = 4;
    const COMMITS_PER_TASK: u32 = 50;
    let test = TestDb::with_schema(Backend::Postgres).await;
    let (config, mut listener) = own_notify_table(&test).await;
    let table = config.table().as_str().to_owned();
    let outbox = Outbox::new(test.db.clone(), config);

    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let outbox = outbox.clone();
            tokio::spawn(async move {
                for i in 0..COMMITS_PER_TASK {
                    let mut uow = outbox.begin();
                    uow.enqueue(&Ping {
                        n: t * COMMITS_PER_TASK + i,
                    })
                    .unwrap();
                    uow.commit().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let commits = i64::from(TASKS * COMMITS_PER_TASK);
    assert_eq!(test.count(&table, "1=1").await, commits);

    let mut notifications = 0_i64;
    while let Ok(received) = timeout(Duration::from_millis(500), listener.recv()).await {
        received.unwrap();
        notifications += 1;
    }
    assert!(
        (1..commits).contains(&notifications),
        "{notifications} notifications for {commits} commits"
    );
}

// ------------------------------------------------------ instantiation

txoutbox_suite::each_backend!(
    commit_writes_order_and_outbox_rows,
    over_long_event_name_is_invalid,
    failed_statement_then_drop_writes_nothing,
    panic_inside_unit_of_work_writes_nothing,
    dropped_unit_of_work_writes_nothing,
    rollback_writes_nothing,
    application_statements_share_the_transaction,
    stale_save_is_a_conflict,
    concurrent_saves_one_wins,
    creating_an_existing_id_is_a_conflict,
    concurrent_creates_one_wins,
    sequences_follow_the_version,
    two_saves_in_one_unit_of_work,
    save_is_written_by_the_commit,
    recreating_a_deleted_aggregate_writes_nothing,
    delete_checks_the_version_and_writes_events,
    uow_enqueue_writes_a_standalone_message,
    outbox_enqueue_follows_the_application_transaction,
    over_long_aggregate_id_is_invalid,
    failed_commit_leaves_the_aggregate_for_a_retry,
    closed_connection_is_a_db_error,
    unserializable_event_fails_at_record,
    message_context_round_trips,
    listeners_receive_exactly_committed_messages,
    migrations_after_create_schema_find_every_change_made,
);

// Migrations start from an empty database.
txoutbox_suite::each_backend!(
    empty: outbox_migrator_creates_the_table,
    application_migrator_creates_a_custom_table,
);

/// PostgreSQL silently rolls back a COMMIT of an aborted transaction: a unit
/// of work whose statement failed (error ignored by the application) and that
/// has no messages to insert must still report the failure.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_commit_of_an_aborted_unit_of_work_fails() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default());
    let mut order = Order::place("o-aborted", 100).unwrap();
    outbox.repository::<Order>().save(&mut order).await.unwrap();
    let mut uow = outbox.begin();
    let mut loaded = uow.load::<Order>("o-aborted").await.unwrap().unwrap();
    loaded.total_cents = 999; // a state change without events: no outbox rows
    uow.save(&mut loaded).await.unwrap();
    let ignored = execute_in(&mut uow, "SELECT * FROM no_such_table").await;
    assert!(ignored.is_err());
    assert!(matches!(uow.commit().await, Err(OutboxError::Db(_))));
    let stored = outbox
        .repository::<Order>()
        .load("o-aborted")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.total_cents, 100, "nothing was committed");
}

/// A hand-written event impl can bypass the derive's name checks; the row
/// writer still refuses names and subjects wider than their columns, on every
/// backend (SQLite would otherwise store them).
#[derive(Debug, Serialize, Deserialize)]
struct LongNamed;

impl txoutbox_core::IntegrationEvent for LongNamed {
    const NAME: &'static str = "a.very.long.event.name.that.goes.on.and.on.well.past.the.width.of.the.event.name.column.which.is.one.hundred.and.twenty.eight.bytes";
    const VERSION: u32 = 1;
}

async fn over_long_event_name_is_invalid(test: TestDb) {
    assert!(LongNamed::NAME.len() > 128);
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default());
    let mut uow = outbox.begin();
    uow.enqueue(&LongNamed).unwrap();
    let err = uow.commit().await.unwrap_err();
    assert!(
        matches!(&err, OutboxError::InvalidMessage { reason, .. } if reason.starts_with("event name")),
        "{err}"
    );
    assert_eq!(test.count("outbox_messages", "1=1").await, 0);
}
