//! A delayed message and a dead one, as the runtime's routes report them
//! over HTTP (issue 43): with a readiness made strict and a 2-s limit on the
//! oldest due message's wait, a message recorded with a one-hour delay and
//! an aggregate held behind a dead message keep `/health/ready` at 200 and
//! `/health/outbox` ok past the limit, and are counted apart
//! (`outbox_delayed 1`, `outbox_blocked_aggregates 1` in `/metrics`).
//! A binary of its own: the runtime installs the process's one recorder.

use std::time::Duration;

use chrono::Utc;
use sea_orm::ConnectionTrait;
use txoutbox::axum::Runtime;
use txoutbox::processor::HealthThresholds;
use txoutbox::{AggregateRoot, JetStreamPublisher, Outbox, OutboxConfig};
use txoutbox_examples::orders::{Order, OrderPaid};
use txoutbox_examples::orders_table;
use txoutbox_fixtures::db::{Backend, TestDb};
use txoutbox_fixtures::http;
use txoutbox_fixtures::jetstream::{TestStream, nats_url};

/// The limit on the oldest due message's wait.
const THRESHOLD: Duration = Duration::from_secs(2);

async fn save(outbox: &Outbox, order: &mut Order) {
    outbox
        .repository::<Order>()
        .save(order)
        .await
        .expect("saved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_and_blocked_messages_keep_the_routes_healthy_and_are_counted() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    let client = async_nats::connect(nats_url()).await.expect("NATS answers");
    let stream = TestStream::new(client.clone()).await;
    let outbox = Outbox::new(
        test.connect_again().await,
        OutboxConfig::default()
            .with_subject_prefix(&stream.prefix)
            .expect("prefix"),
    );
    orders_table::create_table(outbox.db())
        .await
        .expect("orders table");

    // held-1: placed and paid, its first event dead (as a refused publish
    // leaves it), its second behind it. later-1: placed, paid in an hour.
    let mut held = Order::place("held-1", "ada", 100).expect("placed");
    held.pay().expect("paid");
    save(&outbox, &mut held).await;
    test.db
        .execute_unprepared(
            "UPDATE outbox_messages SET status = 2, attempts = 1, last_error = 'refused' \
             WHERE aggregate_id = 'held-1' AND sequence = 1",
        )
        .await
        .expect("held-1#1 dead");
    let mut later = Order::place("later-1", "bob", 100).expect("placed");
    later
        .record_delayed(
            OrderPaid {
                order_id: "later-1".into(),
                amount_cents: 100,
            },
            Utc::now() + chrono::Duration::hours(1),
        )
        .expect("recorded");
    save(&outbox, &mut later).await;

    let runtime = Runtime::builder()
        .processor(
            outbox
                .processor(JetStreamPublisher::new(client.clone(), "/health-backlog"))
                .poll_interval(Duration::from_millis(100))
                .stats_interval(Some(Duration::from_millis(100))),
        )
        .nats_connection(client)
        .health_thresholds(HealthThresholds::default().max_oldest_pending_age(THRESHOLD))
        .strict_readiness(true)
        .handle_signals(false)
        .start()
        .await
        .expect("the runtime starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("its address").to_string();
    let token = runtime.shutdown_token();
    let server = tokio::spawn(runtime.serve(listener, axum::Router::new()));

    // Past the limit, twice over.
    tokio::time::sleep(THRESHOLD * 2).await;
    let ready = http::get(&addr, "/health/ready").await.expect("an answer");
    assert_eq!(ready.status, 200, "strict readiness: {}", ready.body);
    let outbox_state = http::get(&addr, "/health/outbox?strict=true")
        .await
        .expect("an answer");
    assert_eq!(outbox_state.status, 200, "{}", outbox_state.body);
    let state = outbox_state.json();
    assert_eq!(state["status"], "ok", "{state}");
    assert_eq!(state["processor"]["delayed"], 1, "{state}");
    assert_eq!(state["processor"]["blocked_aggregates"], 1, "{state}");
    let metrics = http::get(&addr, "/metrics").await.expect("an answer").body;
    for line in ["outbox_delayed 1", "outbox_blocked_aggregates 1"] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} in /metrics:\n{metrics}"
        );
    }
    assert_eq!(
        stream.count().await,
        1,
        "later-1's placed event went out; nothing else was due and free"
    );

    token.cancel();
    server
        .await
        .expect("the server task")
        .expect("served and shut down");
    stream.delete().await;
}
