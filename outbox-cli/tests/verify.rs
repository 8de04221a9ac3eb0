//! `outbox verify` against real databases (PostgreSQL, MariaDB, SQLite) and
//! the machine's nats-server: events written through the unit of work and
//! drained by the real processor verify clean; then each way the table and
//! the stream can disagree is made by hand and named by the command.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

mod support;

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream::Config, stream::StorageType};
use sea_orm::{ConnectionTrait, Statement};
use serde_json::Value;
use txoutbox_core::{AggregateRef, MessageContext, OutboxMessage, PendingMessage, SubjectPrefix};
use txoutbox_fixtures::jetstream::nats_url;
use txoutbox_fixtures::orders::{Order, OrderPlaced};
use txoutbox_fixtures::{Backend, TestDb};
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::{Outbox, OutboxConfig};

/// Runs `outbox ARGS` on `test`'s database and the shared nats-server;
/// (success, stdout, stderr).
fn outbox(test: &TestDb, args: &[&str]) -> (bool, String, String) {
    let (database, nats) = (support::url(test), nats_url());
    support::run(
        &[("DATABASE_URL", Some(&database)), ("NATS_URL", Some(&nats))],
        args,
    )
    .parts()
}

async fn stream_sequence_of(test: &TestDb, aggregate_id: &str, sequence: u64) -> (String, u64) {
    let row = test
        .db
        .query_one_raw(Statement::from_string(
            test.db_backend(),
            format!(
                "SELECT id, stream_sequence FROM outbox_messages \
                 WHERE aggregate_id = '{aggregate_id}' AND sequence = {sequence}"
            ),
        ))
        .await
        .unwrap()
        .unwrap();
    let id: uuid::Uuid = row.try_get("", "id").unwrap();
    let seq: i64 = row.try_get("", "stream_sequence").unwrap();
    (
        txoutbox_core::MessageId::from_uuid(id).to_string(),
        u64::try_from(seq).unwrap(),
    )
}

fn ten_minutes_ago(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "now() - interval '10 minutes'",
        Backend::MySql => "UTC_TIMESTAMP(6) - INTERVAL 10 MINUTE",
        Backend::Sqlite => "strftime('%Y-%m-%d %H:%M:%f', 'now', '-600 seconds')",
    }
}

async fn verify_names_each_discrepancy(backend: Backend) {
    let test = TestDb::with_schema(backend).await;
    let client = async_nats::connect(nats_url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let tag = &uuid::Uuid::now_v7().simple().to_string()[16..];
    let (stream, prefix) = (format!("V_{tag}"), format!("v{tag}"));
    // A one-second duplicate window: a re-publish a second later is stored
    // again, as one after a long database outage would be.
    js.create_stream(Config {
        name: stream.clone(),
        subjects: vec![format!("{prefix}.>")],
        storage: StorageType::Memory,
        duplicate_window: Duration::from_secs(1),
        max_age: Duration::from_secs(600),
        ..Default::default()
    })
    .await
    .unwrap();
    let outbox_handle = Outbox::new(
        test.db.clone(),
        OutboxConfig::default()
            .with_subject_prefix(&prefix)
            .unwrap(),
    );
    let processor = outbox_handle
        .processor(JetStreamPublisher::new(client.clone(), "/verify-test"))
        .build()
        .unwrap()
        .spawn();
    let orders = outbox_handle.repository::<Order>();
    for i in 1..=3 {
        let mut order = Order::place(format!("o-{i}"), 100).unwrap();
        orders.save(&mut order).await.unwrap();
        order.amend(150).unwrap();
        order.amend(200).unwrap();
        orders.save(&mut order).await.unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while test.count("outbox_messages", "status = 1").await < 9 {
        assert!(tokio::time::Instant::now() < deadline, "not all published");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    processor.shutdown().await.unwrap();

    // Clean: every row in the stream, once, in order.
    let (ok, out, err) = outbox(&test, &["verify", "--stream", &stream, "--json"]);
    assert!(ok, "a clean outbox verifies: {out} {err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["ok"], true);
    assert_eq!(report["rows_checked"], 9);
    assert_eq!(report["messages_checked"], 9);
    assert_eq!(report["aggregates_checked"], 3);
    assert_eq!(report["discrepancies"], Value::Array(vec![]));
    let (ok, out, _) = outbox(&test, &["verify", "--stream", &stream, "--since", "1h"]);
    assert!(ok && out.contains("OK: no discrepancy"), "{out}");
    assert!(out.contains("rows checked        9"), "{out}");

    let handle = js.get_stream(&stream).await.unwrap();
    // 1. A row marked published whose message is gone from the stream.
    let (missing_id, missing_seq) = stream_sequence_of(&test, "o-1", 2).await;
    assert!(handle.delete_message(missing_seq).await.unwrap());
    // 2. A message stored twice: re-published after the duplicate window.
    let (dup_id, dup_seq) = stream_sequence_of(&test, "o-2", 1).await;
    let original = handle.get_raw_message(dup_seq).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let again = js
        .publish_with_headers(
            original.subject.clone(),
            original.headers.clone(),
            original.payload.clone(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(!again.duplicate, "past the window it is stored again");
    // 3. An aggregate's #2 published before its #1, by hand.
    let subject_prefix = SubjectPrefix::new(prefix.as_str()).unwrap();
    let mut by_hand = Vec::new();
    for sequence in [2, 1] {
        let message = OutboxMessage::seal(
            PendingMessage::new(&OrderPlaced {
                order_id: "o-hand".into(),
                total_cents: 1,
            })
            .unwrap(),
            AggregateRef {
                aggregate_type: "order".into(),
                aggregate_id: "o-hand".into(),
                sequence,
            },
            &MessageContext::new(),
            &subject_prefix,
        );
        let mut headers = HeaderMap::new();
        for (name, value) in txoutbox_core::wire::encode(&message, "/by-hand").unwrap() {
            headers.insert(name.as_ref(), value.as_str());
        }
        let ack = js
            .publish_with_headers(
                message.subject.clone(),
                headers,
                message.payload.as_bytes().to_vec().into(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        by_hand.push(ack.sequence);
    }
    // 4. A row still pending after the threshold.
    let mut late = Order::place("o-late", 5).unwrap();
    orders.save(&mut late).await.unwrap();
    test.db
        .execute_unprepared(&format!(
            "UPDATE outbox_messages SET created_at = {} WHERE aggregate_id = 'o-late'",
            ten_minutes_ago(backend)
        ))
        .await
        .unwrap();

    let (ok, out, err) = outbox(&test, &["verify", "--stream", &stream]);
    assert!(!ok, "discrepancies fail the command: {out}");
    assert!(err.contains("verify found 4 discrepancies"), "{err}");
    assert!(
        out.contains(&format!(
            "missing: message {missing_id} (order/o-1 #2) is marked published but is not in the \
             stream (recorded at stream sequence {missing_seq})"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "duplicate: message {dup_id} is stored 2 times, at stream sequences {dup_seq}, {}",
            again.sequence
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "out-of-order: order/o-hand #2 is at stream sequence {}, before #1 at stream \
             sequence {}",
            by_hand[0], by_hand[1]
        )),
        "{out}"
    );
    assert!(
        out.contains("stale-pending: message") && out.contains("order/o-late #1"),
        "{out}"
    );

    let (ok, out, _) = outbox(&test, &["verify", "--stream", &stream, "--json"]);
    assert!(!ok);
    let report: Value = serde_json::from_str(&out).unwrap();
    let kinds: Vec<&str> = report["discrepancies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["missing", "duplicate", "out-of-order", "stale-pending"]
    );
    assert_eq!(report["discrepancies"][0]["id"], missing_id.as_str());
    assert_eq!(report["discrepancies"][1]["id"], dup_id.as_str());

    // A threshold above the late row's age leaves it out.
    let (_, out, _) = outbox(
        &test,
        &[
            "verify",
            "--stream",
            &stream,
            "--pending-older-than",
            "1h",
            "--json",
        ],
    );
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["discrepancies"].as_array().unwrap().len(), 3);
    js.delete_stream(&stream).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres() {
    verify_names_each_discrepancy(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mariadb() {
    verify_names_each_discrepancy(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite() {
    verify_names_each_discrepancy(Backend::Sqlite).await;
}
