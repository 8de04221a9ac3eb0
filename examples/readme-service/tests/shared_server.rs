//! The project's own services on one nats-server, as a person meets them:
//! the README's first command (the demo), then the README's service, then
//! the `axum_service` example. Each keeps its events under names of its own
//! and sends its dead letters to the README's one `DLQ` stream (`dlq.>`),
//! so each starts beside the others.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use txoutbox_examples::order_service::{self, ServiceNames};
use txoutbox_fixtures::db::{Backend, TestDb};
use txoutbox_fixtures::http;
use txoutbox_fixtures::nats::NatsServer;

/// A binary of another package of the workspace, built beside this test's
/// (a workspace test run builds the demo for its own tests).
fn workspace_binary(name: &str) -> PathBuf {
    let deps = std::env::current_exe().expect("this test's path");
    let path = deps
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>")
        .join(name);
    assert!(
        path.exists(),
        "{} is not built: `cargo build -p txoutbox-examples --bin {name}` (a workspace test \
         run builds it)",
        path.display()
    );
    path
}

/// A port nothing listens on now.
async fn free_address() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    listener.local_addr().expect("its address").to_string()
}

/// Polls `path` until it answers `status`, for at most `within`.
async fn until_answers(addr: &str, path: &str, status: u16, within: Duration) -> http::Answer {
    let started = Instant::now();
    loop {
        match http::get(addr, path).await {
            Ok(answer) if answer.status == status => return answer,
            last if started.elapsed() > within => {
                panic!("{path} did not answer {status} within {within:?}: {last:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_the_readme_service_and_axum_service_start_on_one_server() {
    let nats = NatsServer::start().await.expect("a private nats-server");

    // 1. The README's first command: the demo, on an SQLite file of its own.
    let dir = tempfile::tempdir().expect("a temp dir");
    let demo_db = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("demo.sqlite").display()
    );
    let demo = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(workspace_binary("orders-demo"))
            .args(["--orders", "3", "--timeout", "60", "--rate", "20"])
            .env("DATABASE_URL", &demo_db)
            .env("NATS_URL", nats.url())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the demo finishes within 90 s")
    .expect("the demo runs");
    assert!(
        demo.status.success(),
        "the demo failed:\n{}\n{}",
        String::from_utf8_lossy(&demo.stdout),
        String::from_utf8_lossy(&demo.stderr)
    );

    // 2. The README's service, on a database of its own.
    let db = TestDb::new(Backend::Postgres).await;
    let addr = free_address().await;
    let mut service = tokio::process::Command::new(env!("CARGO_BIN_EXE_readme-service"))
        .env("DATABASE_URL", db.url())
        .env("NATS_URL", nats.url())
        .env("LISTEN", &addr)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .expect("the README's service starts");
    until_answers(&addr, "/health/live", 200, Duration::from_secs(30)).await;
    let placed = http::post_json(&addr, "/orders", r#"{"total_cents":1250}"#)
        .await
        .expect("POST /orders answers");
    assert!(
        (200..300).contains(&placed.status),
        "POST /orders: {placed:?}"
    );
    let view = until_answers(
        &addr,
        &format!("/orders/{}", placed.body.trim()),
        200,
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(view.json()["total_cents"], 1250, "{view:?}");
    service.kill().await.expect("stop the README's service");

    // 3. The axum_service example, on its default names.
    let client = nats.connect().await.expect("a client");
    let (_, runtime) = order_service::start(
        db.connect_again().await,
        client.clone(),
        &ServiceNames::default(),
    )
    .await
    .expect("axum_service starts beside the demo and the README's service");
    runtime.shutdown().await.expect("axum_service stops");

    // One dead-letter stream for all three consumers, and each its own
    // stream of events.
    let jetstream = async_nats::jetstream::new(client);
    for (stream, subject) in [
        ("DLQ", "dlq.>"),
        ("DEMO_ORDERS", "demo.>"),
        ("SHOP", "shop.>"),
        ("ORDER_SERVICE", "ordersvc.>"),
    ] {
        let mut found = jetstream
            .get_stream(stream)
            .await
            .unwrap_or_else(|e| panic!("stream {stream}: {e}"));
        let info = found.info().await.expect("its info");
        assert_eq!(info.config.subjects, [subject], "stream {stream}");
    }
}
