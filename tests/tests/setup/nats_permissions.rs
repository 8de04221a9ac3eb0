//! The NATS permissions the operating chapter documents for a service
//! (`outbox/guide/operating.md`, "NATS permissions", read from the file:
//! the test runs on exactly the documented block) are enough: on a private
//! nats-server whose user `orders` has only those permissions, the service
//! creates its streams, its processor publishes, and its subscriber (an
//! inbox, `keep_order`, dead letters) applies every event once and in
//! order through a retry (a nak), a handler longer than the ack wait
//! (progress acks), a rejected message (a term and a dead letter) and a
//! crash with a message in flight (the restart reads it from the stream).
//! The server logs no violation but the one the test provokes at the end to
//! show the permissions are in force.
//!
//! Twice: with v1 ack subjects (`$JS.ACK.<stream>.<consumer>.…`, what
//! nats-server 2.9 to 2.14 send by default; on the suite's
//! `OUTBOX_TEST_NATS_SERVER`, so on 2.9 and on 2.14 in `scripts/test.sh`),
//! and on nats-server 2.14 with v2 ack subjects
//! (`$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.…`, the default
//! from 2.15).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_nats::jetstream;
use txoutbox_core::{Delivery, HandlerError};
use txoutbox_nats::subscriber::{RunningSubscriber, Subscriber};
use txoutbox_nats::{Auth, JetStreamPublisher, NatsConnect, StreamSpec};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, UnitOfWork};
use txoutbox_suite::nats::{NatsServer, current_nats_server};
use txoutbox_suite::orders::{Order, OrderAmended, OrderPlaced};
use txoutbox_suite::subscriber::eventually;
use txoutbox_suite::{Backend, TestDb, effects};

/// The chapter the permissions are documented in.
const GUIDE: &str = include_str!("../../../outbox/guide/operating.md");

/// The first `text` block after the heading "## NATS permissions": the
/// user's `permissions` map, for stream `SHOP` (`shop.>`), durable
/// `order-views` and the dead letters in `DLQ`.
fn documented_permissions() -> &'static str {
    let (_, section) = GUIDE
        .split_once("\n## NATS permissions\n")
        .expect("the chapter has a section \"NATS permissions\"");
    let (_, block) = section
        .split_once("```text\n")
        .expect("the section has a text block");
    let (block, _) = block.split_once("```").expect("the block ends");
    assert!(block.contains("permissions"), "{block}");
    block
}

/// A server configuration with two users: `admin` (anything; also whoever
/// connects without credentials, as the test kit's readiness probe does)
/// and `orders` with the documented permissions. `extra` is appended.
fn configuration(extra: &str) -> String {
    format!(
        "authorization {{\n  users: [\n    {{ user: admin, password: admin }}\n    \
         {{ user: orders, password: orders\n{}\n    }}\n  ]\n}}\nno_auth_user: admin\n{extra}\n",
        documented_permissions()
    )
}

/// The subscriber's handlers: `order.placed` of `o-retry` fails its first
/// delivery (a nak), an amendment of `o-slow` takes longer than the ack
/// wait (progress acks), an amendment to 13 cents is rejected (a term and
/// a dead letter), and `order.placed` of `o-crash` never finishes while
/// `hang` is set (the process is then crashed).
#[derive(Clone)]
struct Handlers {
    hang: Arc<AtomicBool>,
    hanging: Arc<AtomicBool>,
}

impl Handlers {
    async fn placed(
        &self,
        event: OrderPlaced,
        delivery: Delivery,
        uow: &mut UnitOfWork,
    ) -> Result<(), HandlerError> {
        if event.order_id == "o-crash" && self.hang.load(Ordering::SeqCst) {
            self.hanging.store(true, Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
        if event.order_id == "o-retry" && delivery.delivery_count() == 1 {
            return Err(HandlerError::retry("the ledger is not ready"));
        }
        effects::apply(uow, &delivery).await
    }

    async fn amended(
        event: OrderAmended,
        delivery: Delivery,
        uow: &mut UnitOfWork,
    ) -> Result<(), HandlerError> {
        if event.total_cents == 13 {
            return Err(HandlerError::permanent("13 cents is not a total"));
        }
        if event.order_id == "o-slow" {
            tokio::time::sleep(ACK_WAIT * 2).await;
        }
        effects::apply(uow, &delivery).await
    }
}

/// The subscriber's ack wait: short, so the crashed process's message
/// comes back soon, and the slow handler outlasts it.
const ACK_WAIT: Duration = Duration::from_millis(1500);

/// `order-views` on `nats`, applying through `inbox` with `handlers`.
async fn subscriber(
    nats: &async_nats::Client,
    inbox: &Inbox,
    handlers: &Handlers,
) -> RunningSubscriber {
    let placed = handlers.clone();
    Subscriber::builder(nats.clone(), "order-views")
        .stream("SHOP")
        .ack_wait(ACK_WAIT)
        .dead_letter_stream(StreamSpec::dead_letters())
        .on(inbox.handler_boxed(move |event, delivery, uow| {
            let placed = placed.clone();
            Box::pin(async move { placed.placed(event, delivery, uow).await })
        }))
        .on(inbox.handler(Handlers::amended))
        .build()
        .await
        .expect("the subscriber builds with the documented permissions")
        .spawn()
}

async fn save(outbox: &Outbox, order: &mut Order) {
    let mut uow = outbox.begin();
    uow.save(order).await.expect("save");
    uow.commit().await.expect("commit");
}

/// A connection as the user `orders` (async-nats 0.51 ignores credentials
/// in the URL: they go through `Auth`).
async fn as_orders(server: &NatsServer) -> async_nats::Client {
    NatsConnect::new(server.url())
        .auth(Auth::UserPassword {
            user: "orders".into(),
            password: "orders".into(),
        })
        .connect()
        .await
        .expect("the service's user connects")
}

async fn a_service_runs_on_the_documented_permissions(server: NatsServer) {
    let test = TestDb::with_schema(Backend::Sqlite).await;
    effects::create_table(&test).await;
    let outbox = Outbox::new(
        test.db.clone(),
        OutboxConfig::default()
            .with_subject_prefix("shop")
            .expect("prefix"),
    );
    let nats = as_orders(&server).await;
    StreamSpec::new("SHOP", ["shop.>"])
        .ensure(&jetstream::new(nats.clone()))
        .await
        .expect("the service creates its stream");
    let processor = outbox
        .processor(JetStreamPublisher::new(nats.clone(), "/shop"))
        .build()
        .expect("the default processor builds")
        .spawn();
    let inbox = Inbox::new(&outbox, "order-views").expect("inbox");

    // A first process, on a connection of its own, crashes while it
    // handles `o-crash`'s first event.
    let handlers = Handlers {
        hang: Arc::new(AtomicBool::new(true)),
        hanging: Arc::new(AtomicBool::new(false)),
    };
    let first = as_orders(&server).await;
    let crashing = subscriber(&first, &inbox, &handlers).await;
    let mut crashed = Order::place("o-crash", 100).expect("record");
    save(&outbox, &mut crashed).await;
    eventually("o-crash in flight", Duration::from_secs(10), || async {
        handlers.hanging.load(Ordering::SeqCst)
    })
    .await;
    crashing.abort();
    first
        .drain()
        .await
        .expect("the crashed process's connection closes");
    handlers.hang.store(false, Ordering::SeqCst);

    // Everything else, then the process that takes over.
    crashed.amend(200).expect("record");
    save(&outbox, &mut crashed).await;
    for id in ["o-1", "o-2", "o-retry", "o-slow", "o-dead"] {
        let mut order = Order::place(id, 100).expect("record");
        order
            .amend(if id == "o-dead" { 13 } else { 150 })
            .expect("record");
        save(&outbox, &mut order).await;
    }
    let running = subscriber(&nats, &inbox, &handlers).await;

    // Every event applied once, in order, but the rejected one (o-dead's
    // second, whose aggregate is held).
    let written = 12;
    eventually(
        "every event but one applied",
        Duration::from_secs(30),
        || async { test.count("effects", "1 = 1").await == written - 1 },
    )
    .await;
    let mut expected: HashMap<String, Vec<i64>> = ["o-crash", "o-1", "o-2", "o-retry", "o-slow"]
        .into_iter()
        .map(|id| (id.to_owned(), vec![1, 2]))
        .collect();
    expected.insert("o-dead".to_owned(), vec![1]);
    assert_eq!(effects::applied(&test).await, expected);
    let mut dead_letters = jetstream::new(nats.clone())
        .get_stream("DLQ")
        .await
        .expect("the dead-letter stream");
    eventually("the dead letter", Duration::from_secs(10), || {
        let mut dead_letters = dead_letters.clone();
        async move {
            dead_letters
                .info()
                .await
                .is_ok_and(|i| i.state.messages == 1)
        }
    })
    .await;
    assert_eq!(dead_letters.info().await.expect("info").state.messages, 1);
    running
        .shutdown()
        .await
        .expect("the subscriber stops cleanly");
    processor
        .shutdown()
        .await
        .expect("the processor stops cleanly");

    // The permissions are in force: a publish outside them is refused.
    let provoking = as_orders(&server).await;
    provoking
        .publish("elsewhere.x", "refused".into())
        .await
        .expect("sent");
    provoking.flush().await.expect("flushed");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !server.log().contains("elsewhere.x") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no violation logged for a publish outside the permissions; the server's log:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let violations: Vec<String> = server
        .log()
        .lines()
        .filter(|line| line.contains("Violation"))
        .map(str::to_owned)
        .collect();
    assert!(
        violations.len() == 1 && violations[0].contains("elsewhere.x"),
        "the service needed more than the documented permissions: {violations:#?}"
    );
}

/// v1 ack subjects, on the suite's nats-server (2.9 and 2.14).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_permissions_suffice_with_v1_ack_subjects() {
    let server = NatsServer::builder()
        .config(configuration(""))
        .start()
        .await
        .expect("a private nats-server");
    a_service_runs_on_the_documented_permissions(server).await;
}

/// v2 ack subjects, on nats-server 2.14 with `js_ack_fc_v2`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_permissions_suffice_with_v2_ack_subjects() {
    let server = NatsServer::builder()
        .binary(current_nats_server().display().to_string())
        .config(configuration("feature_flags { js_ack_fc_v2: true }"))
        .start()
        .await
        .expect("a private nats-server 2.14");
    a_service_runs_on_the_documented_permissions(server).await;
}

/// The documented block less `lines` (each matched whole, trimmed).
fn permissions_without(lines: &[&str]) -> String {
    let kept: Vec<&str> = documented_permissions()
        .lines()
        .filter(|line| !lines.iter().any(|gone| line.trim().starts_with(gone)))
        .collect();
    assert_eq!(
        kept.len(),
        documented_permissions().lines().count() - lines.len(),
        "every line to remove is in the documented block"
    );
    format!(
        "authorization {{\n  users: [\n    {{ user: admin, password: admin }}\n    \
         {{ user: orders, password: orders\n{}\n    }}\n  ]\n}}\nno_auth_user: admin\n",
        kept.join("\n")
    )
}

/// A permission missing from the service's user ends the subscriber's
/// `build` with `PermissionDenied` naming the JetStream call, and the
/// processor's first publish with a rejection naming the subject (the
/// message spends an attempt and is retried with backoff, and goes dead
/// when its attempts run out, rather than being retried for ever as a slow
/// broker would be).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_permission_is_a_typed_error_not_a_retry_loop() {
    let server = NatsServer::builder()
        .config(permissions_without(&[
            "\"shop.>\"",
            "\"$JS.API.CONSUMER.INFO.SHOP.order-views\"",
        ]))
        .start()
        .await
        .expect("a private nats-server");
    let admin = server.connect().await.expect("admin");
    for spec in [
        StreamSpec::new("SHOP", ["shop.>"]),
        StreamSpec::dead_letters(),
    ] {
        spec.ensure(&jetstream::new(admin.clone()))
            .await
            .expect("the streams");
    }
    let nats = as_orders(&server).await;

    // The subscriber: its build reads the consumer, which it may not.
    let test = TestDb::with_schema(Backend::Sqlite).await;
    let outbox = Outbox::new(
        test.db.clone(),
        OutboxConfig::default()
            .with_subject_prefix("shop")
            .expect("prefix"),
    );
    let inbox = Inbox::new(&outbox, "order-views").expect("inbox");
    let started = std::time::Instant::now();
    let built = Subscriber::builder(nats.clone(), "order-views")
        .stream("SHOP")
        .dead_letter_stream(StreamSpec::dead_letters())
        .on(inbox.handler(Handlers::amended))
        .build()
        .await;
    match built {
        Err(txoutbox_nats::subscriber::SubscriberBuildError::PermissionDenied {
            denied, ..
        }) => {
            assert_eq!(denied.subject, "$JS.API.CONSUMER.INFO.SHOP.order-views");
            assert!(denied.to_string().contains("NATS permissions"), "{denied}");
        }
        Err(other) => panic!("expected PermissionDenied, got {other:?}"),
        Ok(_) => panic!("the subscriber built without its permissions"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "build failed only after {:?}",
        started.elapsed()
    );

    // The processor: its first publish is refused, and says why.
    let processor = outbox
        .processor(JetStreamPublisher::new(nats.clone(), "/shop"))
        .build()
        .expect("the default processor builds")
        .spawn();
    let mut order = Order::place("o-denied", 100).expect("record");
    save(&outbox, &mut order).await;
    eventually(
        "the refused publish recorded on the message",
        Duration::from_secs(15),
        || async {
            test.count(
                "outbox_messages",
                "attempts >= 1 AND last_error LIKE '%may not publish to `shop.test.order.placed`%'",
            )
            .await
                == 1
        },
    )
    .await;
    processor.shutdown().await.expect("a clean stop");
}
