//! The orders demo end to end, as CI runs it: the demo binary writes 20
//! orders into a fresh SQLite database, its processor publishes them to a
//! private nats-server (the demo's dead letters go to the README's `DLQ`
//! stream on `dlq.>`, which would capture the dead-letter subjects other
//! tests give streams of their own on the machine's server), its consumer
//! process builds the read model; then this test checks the read model and
//! the inbox, not the printout.

use std::time::Duration;

use sea_orm::{ConnectionTrait, Database, EntityTrait, QueryOrder, Statement};
use txoutbox_examples::read_model::entity as summary;

const ORDERS: u64 = 20;

/// The status order `i` ends in (the demo's script: ship, cancel, ship, pay).
fn expected_status(i: u64) -> &'static str {
    match i % 4 {
        0 | 2 => "shipped",
        1 => "cancelled",
        _ => "paid",
    }
}

/// Events order `i` records: placed plus one per step.
fn expected_events(i: u64) -> u64 {
    match i % 4 {
        0 | 2 => 3,
        _ => 2,
    }
}

async fn count(db: &sea_orm::DatabaseConnection, sql: &str) -> i64 {
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .expect("query")
        .expect("a row");
    row.try_get_by::<i64, _>(0).expect("a count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_builds_the_read_model_through_nats() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("orders.sqlite").display()
    );
    let nats = txoutbox_fixtures::nats::NatsServer::start()
        .await
        .expect("a private nats-server");

    let output = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_orders-demo"))
            .args([
                "--orders",
                &ORDERS.to_string(),
                "--timeout",
                "60",
                "--rate",
                "20",
            ])
            .env("DATABASE_URL", &url)
            .env("NATS_URL", nats.url())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the demo finishes within 90 s")
    .expect("the demo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);

    assert!(
        output.status.success(),
        "the demo failed ({}):\n{stdout}\n{stderr}",
        output.status
    );

    // The read model: every order, in the status its life ended in.
    let db = Database::connect(url.as_str()).await.expect("sqlite");
    let rows = summary::Entity::find()
        .order_by_asc(summary::Column::OrderId)
        .all(&db)
        .await
        .expect("read model");
    assert_eq!(
        rows.len() as u64,
        ORDERS,
        "one summary per order:\n{stdout}"
    );
    for (i, row) in (0..ORDERS).zip(&rows) {
        assert!(row.order_id.ends_with(&format!("-{i:04}")), "{row:?}");
        assert_eq!(row.status, expected_status(i), "{row:?}");
        assert!(row.total_cents >= 1_000, "{row:?}");
    }

    // Every event published once and applied once through the inbox.
    let events: u64 = (0..ORDERS).map(expected_events).sum();
    let events = i64::try_from(events).expect("small");
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM outbox_messages").await,
        events
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM outbox_messages WHERE status = 1").await,
        events,
        "all published"
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM outbox_inbox WHERE consumer = 'order-summaries'"
        )
        .await,
        events,
        "each event applied once"
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM outbox_inbox i JOIN outbox_messages m ON m.id = i.message_id"
        )
        .await,
        events,
        "the inbox holds exactly the published messages"
    );
}
