//! The README's service starts while its NATS server is down (issue 43,
//! "Start without the broker"): it listens within 5 s on a fresh
//! PostgreSQL database, takes orders, and once nats-server starts,
//! publishes and applies everything placed meanwhile within 5 s.

use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use txoutbox_fixtures::db::{Backend, TestDb};
use txoutbox_fixtures::http;
use txoutbox_testing::nats::NatsServer;

/// A free port on loopback, for the service's `LISTEN`.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    listener.local_addr().expect("its address").to_string()
}

/// `method path` on the service: its status and body.
async fn call(addr: &str, method: &str, path: &str, json: Option<&str>) -> (u16, String) {
    let answer = http::request(addr, method, path, json)
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    (answer.status, answer.body)
}

/// Polls `check` every 50 ms until it is true or `within` has passed;
/// returns how long it took.
async fn within<F, Fut>(within: Duration, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < within {
        if check().await {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_starts_and_takes_orders_while_nats_is_down() {
    // A private nats-server, stopped: its port refuses connections.
    let mut nats = NatsServer::start().await.expect("a private nats-server");
    nats.stop().expect("nats-server stops");
    let database = TestDb::new(Backend::Postgres).await;
    let addr = free_addr();

    let mut service = tokio::process::Command::new(env!("CARGO_BIN_EXE_readme-service"))
        .env("DATABASE_URL", database.url())
        .env("NATS_URL", nats.url())
        .env("LISTEN", &addr)
        .kill_on_drop(true)
        .spawn()
        .expect("the service starts");

    let listening = within(Duration::from_secs(5), || async {
        TcpStream::connect(&addr).await.is_ok()
    })
    .await;
    if listening.is_none() {
        let exited = service.try_wait().expect("its status");
        panic!("the service does not listen within 5 s with NATS down (exited: {exited:?})");
    }
    eprintln!("listening after {listening:?} with NATS down");

    // Writes are taken: two orders, one of them paid.
    let (status, first) = call(&addr, "POST", "/orders", Some(r#"{"total_cents":1250}"#)).await;
    assert_eq!(status, 201, "{first}");
    let (status, second) = call(&addr, "POST", "/orders", Some(r#"{"total_cents":990}"#)).await;
    assert_eq!(status, 201, "{second}");
    let (status, body) = call(&addr, "POST", &format!("/orders/{second}/pay"), None).await;
    assert_eq!(status, 200, "{body}");

    // Alive and ready (its database answers); the outbox says it is
    // connecting, and so does the subscriber.
    let (status, body) = call(&addr, "GET", "/health/live", None).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(&addr, "GET", "/health/ready", None).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(&addr, "GET", "/health/outbox", None).await;
    assert_eq!(status, 200, "degraded, not failed: {body}");
    assert!(body.contains(r#""broker":"connecting""#), "{body}");
    assert!(body.contains(r#""connecting":true"#), "{body}");

    // The broker starts: everything placed is published and applied.
    let started = Instant::now();
    nats.restart().await.expect("nats-server starts");
    let applied = within(Duration::from_secs(5), || async {
        let (first_status, _) = call(&addr, "GET", &format!("/orders/{first}"), None).await;
        let (_, paid) = call(&addr, "GET", &format!("/orders/{second}"), None).await;
        first_status == 200 && paid.contains(r#""paid":true"#)
    })
    .await
    .map(|_| started.elapsed());
    eprintln!("applied {applied:?} after nats-server was started");
    let (_, outbox) = call(&addr, "GET", "/health/outbox", None).await;
    let _ = service.kill().await;
    assert!(
        applied.is_some_and(|took| took <= Duration::from_secs(5)),
        "not applied within 5 s of the broker's start; the outbox: {outbox}\nnats log: {}",
        nats.log()
    );
    assert!(outbox.contains(r#""broker":"connected""#), "{outbox}");
    assert!(outbox.contains(r#""connecting":false"#), "{outbox}");
}
