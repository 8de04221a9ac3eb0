//! The README's service through a broker outage, over HTTP, as a load
//! balancer and a client see it: the binary runs against a private
//! nats-server and a fresh PostgreSQL schema; the nats-server stops for
//! 30 s. Throughout, `/health/ready` answers 200 (the service keeps its
//! place behind the balancer), `POST /orders` answers 201 (the outbox takes
//! the writes) and `/health/outbox` reports the broker away; once the
//! server is back, every order placed meanwhile is published and applied
//! to the read model.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::time::{Instant, sleep};
use txoutbox_fixtures::db::{Backend, TestDb};
use txoutbox_fixtures::http;
use txoutbox_testing::nats::NatsServer;

/// How long the broker stays away.
const OUTAGE: Duration = Duration::from_secs(30);
/// How often the balancer's readiness check polls.
const POLL: Duration = Duration::from_millis(250);

/// The service's process, killed on drop.
struct Service {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request on a connection of its own: the status and the body, or
/// why there is none.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    json: Option<&str>,
) -> Result<(u16, String), String> {
    http::request(&addr.to_string(), method, path, json)
        .await
        .map(|answer| (answer.status, answer.body))
        .map_err(|e| format!("{method} {path}: {e}"))
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    request(addr, "GET", path, None)
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

async fn outbox_health(addr: SocketAddr) -> Value {
    let (status, body) = get(addr, "/health/outbox").await;
    assert_eq!(
        status, 200,
        "/health/outbox answers 200, degraded or not: {body}"
    );
    serde_json::from_str(&body).expect("JSON")
}

/// `POST /orders`: must answer 201 with the new order's id.
async fn place(addr: SocketAddr, total_cents: i64) -> String {
    let (status, id) = request(
        addr,
        "POST",
        "/orders",
        Some(&format!(r#"{{"total_cents":{total_cents}}}"#)),
    )
    .await
    .unwrap_or_else(|e| panic!("POST /orders: {e}"));
    assert_eq!(status, 201, "POST /orders: {id}");
    id
}

/// Starts the binary and waits until it answers `/health/ready`.
async fn start_service(database_url: &str, nats_url: &str) -> Service {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let child = Command::new(env!("CARGO_BIN_EXE_readme-service"))
        .env("DATABASE_URL", database_url)
        .env("NATS_URL", nats_url)
        .env("LISTEN", addr.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the readme-service binary starts");
    let mut service = Service { child, addr };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok((200, _)) = request(addr, "GET", "/health/ready", None).await {
            return service;
        }
        if let Ok(Some(exit)) = service.child.try_wait() {
            panic!("the service exited at start: {exit}");
        }
        assert!(
            Instant::now() < deadline,
            "the service is not ready within 20 s"
        );
        sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `GET /orders/{id}` until the read model has it.
async fn wait_until_applied(addr: SocketAddr, ids: &[String], within: Duration) {
    let deadline = Instant::now() + within;
    for id in ids {
        loop {
            let (status, body) = get(addr, &format!("/orders/{id}")).await;
            if status == 200 {
                let view: Value = serde_json::from_str(&body).expect("an order view");
                assert_eq!(view["id"], id.as_str(), "{body}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "order {id} not applied within {within:?} (GET answers {status}: {body})"
            );
            sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_stays_ready_through_a_broker_outage() {
    let mut nats = NatsServer::start().await.expect("a private nats-server");
    let database = TestDb::new(Backend::Postgres).await;
    let service = start_service(&database.url(), &nats.url()).await;
    let addr = service.addr;

    // Before: an order goes all the way to the read model.
    let first = place(addr, 100).await;
    wait_until_applied(addr, std::slice::from_ref(&first), Duration::from_secs(10)).await;
    let health = outbox_health(addr).await;
    assert_eq!(health["broker"], "connected", "{health}");

    // The outage: the balancer polls readiness, clients keep ordering.
    nats.stop().expect("nats-server stops");
    let stopped = Instant::now();
    let mut placed = Vec::new();
    let mut polls = 0;
    let mut next_order = Instant::now();
    while stopped.elapsed() < OUTAGE {
        let (status, body) = get(addr, "/health/ready").await;
        assert_eq!(
            status,
            200,
            "/health/ready {:.1} s into the outage: {body}",
            stopped.elapsed().as_secs_f64()
        );
        polls += 1;
        if Instant::now() >= next_order {
            placed.push(place(addr, 1_000 + placed.len() as i64).await);
            next_order += Duration::from_secs(2);
        }
        sleep(POLL).await;
    }
    let (_, ready) = get(addr, "/health/ready").await;
    let ready: Value = serde_json::from_str(&ready).expect("JSON");
    assert_eq!(ready["database"], "up", "{ready}");
    let health = outbox_health(addr).await;
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["broker"], "disconnected", "{health}");
    assert!(
        health["degraded"]
            .as_array()
            .is_some_and(|parts| parts.iter().any(|part| part == "broker")),
        "{health}"
    );
    let (strict, _) = get(addr, "/health/outbox?strict=true").await;
    assert_eq!(strict, 503, "a monitor that asks gets 503 while degraded");
    assert!(polls >= 100, "polled every ~250 ms: {polls} polls");
    assert!(placed.len() >= 14, "an order every 2 s: {}", placed.len());

    // After: everything placed during the outage is published and applied.
    nats.restart().await.expect("nats-server restarts");
    wait_until_applied(addr, &placed, Duration::from_secs(20)).await;
    let health = outbox_health(addr).await;
    assert_eq!(health["broker"], "connected", "{health}");
    drop(service);
}
