//! The README's service starts while its NATS server is down (issue 43,
//! "Start without the broker"): it listens within 5 s on a fresh
//! PostgreSQL database, takes orders, and once nats-server starts,
//! publishes and applies everything placed meanwhile within 5 s.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Database};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use txoutbox_testing::nats::NatsServer;

const POSTGRES: &str = "postgres://postgres@127.0.0.1/test";

/// One HTTP/1.1 request on a connection of its own: the status and body.
async fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// A free port on loopback, for the service's `LISTEN`.
fn free_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    listener.local_addr().expect("its address")
}

/// A database of the test's own, dropped at the end.
struct FreshDatabase {
    name: String,
}

impl FreshDatabase {
    async fn create() -> Self {
        let name = format!("readme_start_{}", txoutbox::uuid::Uuid::now_v7().simple());
        let admin = Database::connect(POSTGRES).await.expect("PostgreSQL");
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await
            .expect("a fresh database");
        Self { name }
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1/{}", self.name)
    }

    async fn drop_it(self) {
        let admin = Database::connect(POSTGRES).await.expect("PostgreSQL");
        let _ = admin
            .execute_unprepared(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .await;
    }
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
    let database = FreshDatabase::create().await;
    let addr = free_addr();

    let mut service = tokio::process::Command::new(env!("CARGO_BIN_EXE_readme-service"))
        .env("DATABASE_URL", database.url())
        .env("NATS_URL", nats.url())
        .env("LISTEN", addr.to_string())
        .kill_on_drop(true)
        .spawn()
        .expect("the service starts");

    let listening = within(Duration::from_secs(5), || async {
        TcpStream::connect(addr).await.is_ok()
    })
    .await;
    if listening.is_none() {
        let exited = service.try_wait().expect("its status");
        database.drop_it().await;
        panic!("the service does not listen within 5 s with NATS down (exited: {exited:?})");
    }
    eprintln!("listening after {listening:?} with NATS down");

    // Writes are taken: two orders, one of them paid.
    let (status, first) = http(addr, "POST", "/orders", r#"{"total_cents":1250}"#).await;
    assert_eq!(status, 200, "{first}");
    let (status, second) = http(addr, "POST", "/orders", r#"{"total_cents":990}"#).await;
    assert_eq!(status, 200, "{second}");
    let (status, body) = http(addr, "POST", &format!("/orders/{second}/pay"), "").await;
    assert_eq!(status, 200, "{body}");

    // Alive; the subscriber says it is connecting. (Readiness is strict in
    // this branch: not ready while the broker is away.)
    let (status, body) = http(addr, "GET", "/health/live", "").await;
    assert_eq!(status, 200, "{body}");
    let (_, body) = http(addr, "GET", "/health/ready", "").await;
    assert!(body.contains(r#""connecting":true"#), "{body}");

    // The broker starts: everything placed is published and applied.
    let started = Instant::now();
    nats.restart().await.expect("nats-server starts");
    let applied = within(Duration::from_secs(5), || async {
        let (first_status, _) = http(addr, "GET", &format!("/orders/{first}"), "").await;
        let (_, paid) = http(addr, "GET", &format!("/orders/{second}"), "").await;
        first_status == 200 && paid.contains(r#""paid":true"#)
    })
    .await
    .map(|_| started.elapsed());
    eprintln!("applied {applied:?} after nats-server was started");
    let (_, ready) = http(addr, "GET", "/health/ready", "").await;
    let _ = service.kill().await;
    database.drop_it().await;
    assert!(
        applied.is_some_and(|took| took <= Duration::from_secs(5)),
        "not applied within 5 s of the broker's start; readiness: {ready}\nnats log: {}",
        nats.log()
    );
    assert!(ready.contains(r#""connecting":false"#), "{ready}");
}
