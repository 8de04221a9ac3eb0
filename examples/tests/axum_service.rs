//! The `axum_service` example over real HTTP, in-process on 127.0.0.1:0, on
//! a fresh PostgreSQL schema and the machine's NATS (a stream, subjects and
//! consumer of its own): orders go in through `POST /orders`, come back
//! through the read model, `/health/ready`, `/health/outbox` and `/metrics`
//! report them, and
//! a shutdown in the middle of a burst loses nothing and leaves nothing
//! leased: after a restart every saved order is in the stream once and in
//! the read model.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use txoutbox::axum::Runtime;
use txoutbox::processor::ProcessorReport;
use txoutbox_examples::order_service::{self, OrderView, Placed, ServiceNames, VIEW_TABLE};
use txoutbox_fixtures::db::{Backend, TestDb};
use txoutbox_fixtures::jetstream::{TestStream, nats_url};

/// The service, serving on a port of its own.
struct Service {
    addr: SocketAddr,
    runtime: Runtime,
    server: JoinHandle<std::io::Result<()>>,
}

impl Service {
    async fn start(db: &TestDb, names: &ServiceNames) -> Self {
        let nats = async_nats::connect(nats_url()).await.expect("NATS answers");
        let (app, runtime) = order_service::start(db.connect_again().await, nats, names)
            .await
            .expect("the service starts");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let addr = listener.local_addr().expect("its address");
        let server = tokio::spawn(
            axum::serve(listener, app)
                .with_graceful_shutdown(runtime.shutdown_signal())
                .into_future(),
        );
        Self {
            addr,
            runtime,
            server,
        }
    }

    /// As SIGTERM would: the server drains, then the runtime stops in order.
    async fn stop(self) -> Option<ProcessorReport> {
        self.runtime.shutdown_token().cancel();
        self.server
            .await
            .expect("the server task")
            .expect("the server stops cleanly");
        let readiness = self.runtime.health().readiness().await;
        assert!(
            !readiness.ready && readiness.shutting_down,
            "not ready once shutting down: {readiness:?}"
        );
        self.runtime
            .shutdown()
            .await
            .expect("the runtime stops cleanly")
    }
}

/// One HTTP/1 request on a connection of its own: the status and the body,
/// or the error when the server is gone.
async fn request(
    addr: SocketAddr,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<(StatusCode, String), Box<dyn std::error::Error + Send + Sync>> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        )))?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

async fn get(addr: SocketAddr, path: &str) -> (StatusCode, String) {
    request(addr, Method::GET, path, None)
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

async fn place(addr: SocketAddr, customer: &str, total_cents: u64) -> Option<String> {
    let body = json!({ "customer": customer, "total_cents": total_cents });
    match request(addr, Method::POST, "/orders", Some(body)).await {
        Ok((StatusCode::CREATED, body)) => {
            let placed: Placed = serde_json::from_str(&body).expect("a Placed body");
            Some(placed.id)
        }
        _ => None, // the server is going away
    }
}

/// Polls `GET /orders/{id}` until it answers `status`.
async fn wait_for_view(addr: SocketAddr, id: &str, status: &str) -> OrderView {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = get(addr, &format!("/orders/{id}")).await;
        if code == StatusCode::OK {
            let view: OrderView = serde_json::from_str(&body).expect("an OrderView body");
            if view.status == status {
                return view;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "order {id} not `{status}` in the read model after 30 s: {code} {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn ids(db: &TestDb, sql: &str) -> BTreeSet<String> {
    db.rows(sql)
        .await
        .iter()
        .map(|row| row.try_get_by_index::<String>(0).expect("an id"))
        .collect()
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    db.row(sql).await.try_get_by_index(0).expect("a count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_flow_through_health_metrics_and_a_shutdown_mid_burst() {
    let db = TestDb::new(Backend::Postgres).await;
    let tag = &uuid::Uuid::now_v7().simple().to_string()[20..];
    let names = ServiceNames {
        prefix: format!("axsvc{tag}"),
        stream: format!("AXSVC_{tag}"),
        durable: format!("axsvc-views-{tag}"),
        dead_letter_stream: Some(format!("AXSVC_DLQ_{tag}")),
    };
    let client = async_nats::connect(nats_url()).await.expect("NATS answers");
    let jetstream = async_nats::jetstream::new(client);

    // 1. Orders in, the read model out, over HTTP.
    let service = Service::start(&db, &names).await;
    // The streams are the service's; these wrappers read and delete them.
    let stream = TestStream {
        jetstream: jetstream.clone(),
        name: names.stream.clone(),
        prefix: names.prefix.clone(),
    };
    let _dead_letters = TestStream {
        jetstream: jetstream.clone(),
        name: format!("AXSVC_DLQ_{tag}"),
        prefix: String::new(),
    };
    let addr = service.addr;
    let mut first = Vec::new();
    for i in 0..5 {
        first.push(place(addr, "ada", 100 + i).await.expect("201"));
    }
    let (paid, _) = request(
        addr,
        Method::POST,
        &format!("/orders/{}/pay", first[0]),
        None,
    )
    .await
    .expect("POST pay");
    assert_eq!(paid, StatusCode::NO_CONTENT);
    let view = wait_for_view(addr, &first[0], "paid").await;
    assert_eq!((view.customer.as_str(), view.total_cents), ("ada", 100));
    for id in &first[1..] {
        wait_for_view(addr, id, "placed").await;
    }
    let (missing, _) = get(addr, "/orders/o-none").await;
    assert_eq!(missing, StatusCode::NOT_FOUND);

    // 2. Health: live, ready (the database up), the outbox with each
    //    subscriber's lag and holds.
    let (live, body) = get(addr, "/health/live").await;
    assert_eq!(live, StatusCode::OK, "{body}");
    let (ready, body) = get(addr, "/health/ready").await;
    assert_eq!(ready, StatusCode::OK, "{body}");
    let ready: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(ready["ready"], true, "{ready}");
    assert_eq!(ready["database"], "up", "{ready}");
    let (status, body) = get(addr, "/health/outbox?strict=true").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let outbox: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(outbox["status"], "ok", "{outbox}");
    assert_eq!(outbox["broker"], "connected", "{outbox}");
    assert_eq!(outbox["processor"]["running"], true, "{outbox}");
    let subscriber = &outbox["subscribers"][0];
    assert_eq!(subscriber["durable"], names.durable.as_str(), "{ready}");
    assert_eq!(subscriber["connected"], true, "{ready}");
    assert!(
        subscriber["pending"].is_u64(),
        "the lag is reported: {ready}"
    );
    assert!(subscriber["ack_pending"].is_u64(), "{ready}");
    assert_eq!(subscriber["held_aggregates"], 0, "{ready}");
    assert_eq!(subscriber["consumers"][0]["present"], true, "{ready}");

    // 3. Metrics: the processor's and the subscriber's, in Prometheus text.
    let (metrics, text) = get(addr, "/metrics").await;
    assert_eq!(metrics, StatusCode::OK);
    for name in [
        "outbox_published_total",
        "outbox_consumer_handled_total",
        "outbox_consumer_in_flight",
    ] {
        assert!(text.contains(name), "/metrics lacks {name}:\n{text}");
    }

    // 4. A burst, and a shutdown in the middle of it: requests still
    //    arriving, the processor publishing, the subscriber applying.
    let accepted = Arc::new(AtomicUsize::new(0));
    let burst = {
        let accepted = Arc::clone(&accepted);
        tokio::spawn(async move {
            futures::stream::iter(0..300u64)
                .map(|i| {
                    let accepted = Arc::clone(&accepted);
                    async move {
                        let id = place(addr, "bob", 1_000 + i).await;
                        if id.is_some() {
                            accepted.fetch_add(1, Ordering::Relaxed);
                        }
                        id
                    }
                })
                .buffer_unordered(16)
                .filter_map(std::future::ready)
                .collect::<Vec<String>>()
                .await
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while accepted.load(Ordering::Relaxed) < 100 {
        assert!(tokio::time::Instant::now() < deadline, "the burst stalled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let report = service.stop().await.expect("the runtime had a processor");
    let burst = burst.await.expect("the burst task");
    assert!(burst.len() >= 100, "{} accepted", burst.len());
    assert!(report.published > 0, "{report:?}");

    // Nothing stays leased; what the requests committed is all there.
    let leased = count(
        &db,
        "SELECT COUNT(*) FROM outbox_messages WHERE lease_token IS NOT NULL",
    )
    .await;
    assert_eq!(leased, 0, "outbox rows left leased after shutdown");
    let saved = ids(&db, "SELECT id FROM demo_orders").await;
    for id in first.iter().chain(&burst) {
        assert!(saved.contains(id), "order {id} was accepted but not saved");
    }
    let unpublished = count(
        &db,
        "SELECT COUNT(*) FROM outbox_messages WHERE status <> 1",
    )
    .await;
    let applied = count(&db, &format!("SELECT COUNT(*) FROM {VIEW_TABLE}")).await;
    eprintln!(
        "shutdown mid-burst: {} orders accepted, {} saved, {} published by the stopped \
         processor, {unpublished} left for the next one, {applied} in the read model",
        first.len() + burst.len(),
        saved.len(),
        report.published
    );

    // 5. A restart: the next processor publishes what was left, the
    //    subscriber applies the rest; every saved order ends up in the
    //    stream once and in the read model.
    let service = Service::start(&db, &names).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let applied = ids(&db, &format!("SELECT order_id FROM {VIEW_TABLE}")).await;
        if applied == saved {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "read model incomplete after the restart: {} of {} orders; missing {:?}",
            applied.len(),
            saved.len(),
            saved.difference(&applied).take(5).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = burst.last().unwrap_or(&first[0]);
    wait_for_view(service.addr, last, "placed").await;
    let unpublished = count(
        &db,
        "SELECT COUNT(*) FROM outbox_messages WHERE status <> 1",
    )
    .await;
    assert_eq!(unpublished, 0, "every outbox row is published");
    let mut placed: BTreeMap<String, usize> = BTreeMap::new();
    for (_, message) in stream.messages().await {
        if message.event_name == "order.placed" {
            *placed.entry(message.aggregate_id).or_default() += 1;
        }
    }
    assert_eq!(
        placed.keys().cloned().collect::<BTreeSet<_>>(),
        saved,
        "the stream holds every saved order's order.placed"
    );
    assert!(
        placed.values().all(|&n| n == 1),
        "each once: {:?}",
        placed.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    let (ready, body) = get(service.addr, "/health/ready").await;
    assert_eq!(ready, StatusCode::OK, "{body}");

    // 6. The consumer deleted under the running service: the outbox is
    //    degraded (503 for a monitor that asks) and says why; the service
    //    still takes requests.
    jetstream
        .get_stream(&names.stream)
        .await
        .expect("the stream")
        .delete_consumer(&names.durable)
        .await
        .expect("delete the consumer");
    let (outbox, body) = get(service.addr, "/health/outbox?strict=true").await;
    assert_eq!(outbox, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body.contains("missing") || body.contains("stopped"),
        "the reason: {body}"
    );
    let (ready, body) = get(service.addr, "/health/ready").await;
    assert_eq!(ready, StatusCode::OK, "{body}");
    service.runtime.shutdown_token().cancel();
    let _ = service.server.await;
    // The subscriber may report its deleted consumer: not asserted.
    let _ = service.runtime.shutdown().await;
    stream.delete().await;
}
