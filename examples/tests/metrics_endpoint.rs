//! The metrics example's endpoints for real: a processor on a fresh SQLite
//! database publishing to the machine's nats-server, the Prometheus
//! recorder installed, `/metrics` and `/health` read over HTTP. Healthy
//! while it publishes; 503 once a message waits longer than the threshold
//! (its subject is one no stream captures, so the broker refuses it).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use txoutbox::processor::HealthThresholds;
use txoutbox::{JetStreamPublisher, StreamSpec};
use txoutbox::{Outbox, OutboxConfig};
use txoutbox_examples::ops_http::{self, OpsEndpoints};
use txoutbox_examples::orders::Order;
use txoutbox_examples::support;

/// `GET path` on `addr`: (status, body).
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut text = String::new();
    socket.read_to_string(&mut text).await.unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_health_over_http() {
    let metrics = PrometheusBuilder::new().install_recorder().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("m.db").display());
    let tag = &uuid::Uuid::now_v7().simple().to_string()[16..];
    let (stream, prefix) = (format!("M_{tag}"), format!("m{tag}"));
    let config = OutboxConfig::default()
        .with_subject_prefix(&prefix)
        .unwrap();
    let outbox = support::open_outbox(&url, config.clone()).await.unwrap();
    txoutbox_examples::orders_table::create_table(outbox.db())
        .await
        .unwrap();
    let client = async_nats::connect(support::Nats::find_or_start().unwrap().url.as_str())
        .await
        .unwrap();
    let jetstream = async_nats::jetstream::new(client.clone());
    StreamSpec::new(&stream, [format!("{prefix}.>")])
        .storage(async_nats::jetstream::stream::StorageType::Memory)
        .processor_lease(Duration::from_secs(3))
        .ensure(&jetstream)
        .await
        .unwrap();
    let processor = outbox
        .processor(JetStreamPublisher::new(client, "/metrics-test"))
        .poll_interval(Duration::from_millis(100))
        .stats_interval(Some(Duration::from_millis(100)))
        .retry(txoutbox::store::RetryPolicy::new(
            1000,
            Duration::from_millis(50),
            Duration::from_millis(200),
        ))
        .build()
        .unwrap()
        .spawn();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(ops_http::serve(
        listener,
        OpsEndpoints {
            metrics,
            health: processor.health(),
            thresholds: HealthThresholds::default()
                .max_claim_gap(Duration::from_secs(2))
                .max_oldest_pending_age(Duration::from_secs(1)),
        },
        shutdown.clone(),
    ));

    let mut order = Order::place("o-1", "ada", 100).unwrap();
    outbox.repository::<Order>().save(&mut order).await.unwrap();
    eventually("published and counted", async || {
        get(addr, "/metrics")
            .await
            .1
            .lines()
            .any(|l| l == "outbox_published_total 1")
    })
    .await;
    // The backlog's gauges come from the processor's periodic stats read,
    // which may follow the first publish.
    eventually("the backlog gauges sampled", async || {
        get(addr, "/metrics")
            .await
            .1
            .contains("outbox_oldest_pending_age_seconds")
    })
    .await;
    assert_eq!(get(addr, "/metrics").await.0, 200);
    eventually("healthy", async || get(addr, "/health").await.0 == 200).await;
    let (_, body) = get(addr, "/health").await;
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["healthy"], true, "{body}");
    assert_eq!(get(addr, "/nope").await.0, 404);

    // A message on a subject no stream captures: refused, retried, waiting.
    let elsewhere = Outbox::new(
        outbox.db().clone(),
        OutboxConfig::default()
            .with_subject_prefix(format!("nowhere{tag}"))
            .unwrap(),
    );
    let mut stuck = Order::place("o-2", "bob", 5).unwrap();
    elsewhere
        .repository::<Order>()
        .save(&mut stuck)
        .await
        .unwrap();
    eventually("unhealthy", async || get(addr, "/health").await.0 == 503).await;
    let (_, body) = get(addr, "/health").await;
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["healthy"], false);
    assert!(
        health["problems"][0]
            .as_str()
            .unwrap()
            .contains("the oldest pending message that is due"),
        "{body}"
    );
    assert!(health["oldest_pending_age_seconds"].as_f64().unwrap() > 1.0);

    shutdown.cancel();
    server.await.unwrap();
    processor.shutdown().await.unwrap();
    jetstream.delete_stream(&stream).await.unwrap();
}
