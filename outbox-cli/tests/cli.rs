//! The `outbox` command against real databases (MariaDB and SQLite): status,
//! dead messages with what waits behind them, requeue only with --yes, a
//! consumer's held aggregates and their release, and clear errors.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::process::Command;

use outbox_core::{HeldMessages, MessageId, ParkedMessage, Release};
use outbox_sea_orm::{Inbox, Outbox, OutboxConfig};
use outbox_tests::orders::Order;
use outbox_tests::{Backend, TestDb};
use sea_orm::ConnectionTrait;
use serde_json::Value;

/// Runs `outbox ARGS` on `test`'s database; (success, stdout, stderr).
fn outbox(test: &TestDb, args: &[&str]) -> (bool, String, String) {
    let (url, _) = test.location();
    let output = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .args(args)
        .env("DATABASE_URL", url)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn json(test: &TestDb, args: &[&str]) -> Value {
    let (ok, out, err) = outbox(test, args);
    assert!(ok, "outbox {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

async fn operator_sees_and_repairs(backend: Backend) {
    let test = TestDb::with_schema(backend).await;
    let outbox_handle = Outbox::new(test.db.clone(), OutboxConfig::default().without_notify());
    let orders = outbox_handle.repository::<Order>();
    let mut order = Order::place("o-1", 100).unwrap();
    orders.save(&mut order).await.unwrap();
    order.amend(150).unwrap();
    order.amend(200).unwrap();
    orders.save(&mut order).await.unwrap();
    orders
        .save(&mut Order::place("o-2", 5).unwrap())
        .await
        .unwrap();
    // o-1's first message went dead: its two amendments wait behind it.
    test.db
        .execute_unprepared(
            "UPDATE outbox_messages SET status = 2, attempts = 10, \
             last_error = 'payload over max_payload' WHERE aggregate_id = 'o-1' AND sequence = 1",
        )
        .await
        .unwrap();

    let status = json(&test, &["status", "--json"]);
    assert_eq!(status["dead"], 1);
    assert_eq!(status["pending"], 3);
    let (ok, text, _) = outbox(&test, &["status"]);
    assert!(ok && text.contains("dead     1"), "{text}");

    let dead = json(&test, &["dead", "list", "--json"]);
    assert_eq!(dead.as_array().unwrap().len(), 1);
    assert_eq!(dead[0]["aggregate_id"], "o-1");
    assert_eq!(dead[0]["waiting_behind"], 2);
    assert_eq!(dead[0]["last_error"], "payload over max_payload");

    // Destructive commands need --yes.
    let (ok, out, _) = outbox(&test, &["dead", "requeue", "--all"]);
    assert!(ok && out.contains("add --yes"), "{out}");
    assert_eq!(test.count("outbox_messages", "status = 2").await, 1);
    let (ok, out, _) = outbox(&test, &["dead", "requeue", "--all", "--yes"]);
    assert!(ok && out.contains("requeued 1"), "{out}");
    assert_eq!(test.count("outbox_messages", "status = 2").await, 0);
    let (ok, _, err) = outbox(&test, &["dead", "requeue", "--yes"]);
    assert!(!ok && err.contains("name the messages"), "{err}");

    // A consumer's held aggregate, released.
    let inbox = Inbox::new(&outbox_handle, "billing").unwrap();
    let id = MessageId::new();
    HeldMessages::park(
        &inbox,
        ParkedMessage::new(
            id,
            "order",
            "o-9",
            7,
            "events.order.paid",
            vec![("ce-type".to_owned(), "order.paid".to_owned())],
            b"{}".to_vec(),
            Some("rejected: card declined".to_owned()),
        ),
    )
    .await
    .unwrap();
    let holds = json(&test, &["holds", "--consumer", "billing", "--json"]);
    assert_eq!(holds[0]["aggregate_id"], "o-9");
    assert_eq!(holds[0]["reason"], "rejected: card declined");
    assert_eq!(holds[0]["release"], Value::Null);
    let (ok, out, _) = outbox(
        &test,
        &[
            "release",
            "--consumer",
            "billing",
            "order",
            "o-9",
            "--skip",
            "--yes",
        ],
    );
    assert!(ok && out.contains("released order/o-9 (skip)"), "{out}");
    assert_eq!(inbox.holds().await.unwrap()[0].release, Some(Release::Skip));
    let (ok, _, err) = outbox(
        &test,
        &[
            "release",
            "--consumer",
            "billing",
            "order",
            "o-404",
            "--yes",
        ],
    );
    assert!(!ok && err.contains("is not held"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_database_url_is_a_clear_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .args(["status"])
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("connecting to the database"), "{err}");
    let output = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .args(["status"])
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("set DATABASE_URL"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mariadb() {
    operator_sees_and_repairs(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite() {
    operator_sees_and_repairs(Backend::Sqlite).await;
}
