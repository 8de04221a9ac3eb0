//! A consumer whose inbox's database goes away while it holds a full
//! window: private PostgreSQL (`pg_ctl stop -m immediate`) and MariaDB
//! (SIGKILL) servers, stopped for longer than the consumer's deliveries
//! last at the test's settings (3 deliveries, backoff 100-200 ms, a 1-s
//! pool acquire timeout), with 2,000 messages of 1,000 aggregates in the
//! stream and a full window (`max_ack_pending` 1,000) in flight. The
//! outage spends no delivery: nothing is dead-lettered or held, every
//! effect is applied once, in each aggregate's order, each from its first
//! delivery, and everything is applied within 5 s of the database's
//! return. With inbox groups (the default) and with one transaction per
//! message. And a rejected message whose hold cannot be recorded (the
//! database is down) is not dead-lettered without it: it waits, and its
//! aggregate's next message is not applied past it.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend};
use serde::{Deserialize, Serialize};
use txoutbox_core::{Delivery, HandlerError, IntegrationEvent};
use txoutbox_nats::subscriber::{Backoff, InboxGroups, SubscriberBuilder};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, UnitOfWork};
use txoutbox_suite::effects;
use txoutbox_suite::private_postgres::{PrivatePostgres, Shutdown};
use txoutbox_suite::private_server::PrivateServer;
use txoutbox_suite::subscriber::SubscriberFixture;
use txoutbox_suite::{Backend, TestDb};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "outage.account.credited")]
struct AccountCredited {
    step: u64,
}

const AGGREGATES: usize = 1_000;
const STEPS: u64 = 2;
/// Longer than the consumer's deliveries last without the pause (3
/// deliveries 100-200 ms apart, each failing within the 1-s acquire
/// timeout).
const OUTAGE: Duration = Duration::from_secs(8);
/// Everything committed before the outage is applied within this of the
/// database's return.
const BACK_WITHIN: Duration = Duration::from_secs(5);

/// How the consumer applies its messages.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// Inbox groups (the default).
    Groups,
    /// One transaction per message.
    PerMessage,
}

/// A pool of the test's database whose acquire gives up after 1 s.
async fn short_pool(test: &TestDb) -> DatabaseConnection {
    let (url, schema) = test.location();
    let mut options = ConnectOptions::new(url);
    if let Some(schema) = schema {
        options.set_schema_search_path(schema);
    }
    options
        .max_connections(10)
        .acquire_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(1))
        .sqlx_logging(false);
    Database::connect(options).await.unwrap()
}

/// Per aggregate, (sequence, delivery) in the order they were committed.
async fn applied(db: &DatabaseConnection, backend: DbBackend) -> HashMap<String, Vec<(i64, i64)>> {
    let rows = db
        .query_all_raw(sea_orm::Statement::from_string(
            backend,
            "SELECT aggregate_id, sequence, delivery FROM deliveries ORDER BY id",
        ))
        .await
        .unwrap();
    let mut by_aggregate: HashMap<String, Vec<(i64, i64)>> = HashMap::new();
    for row in rows {
        by_aggregate
            .entry(row.try_get("", "aggregate_id").unwrap())
            .or_default()
            .push((
                row.try_get("", "sequence").unwrap(),
                row.try_get("", "delivery").unwrap(),
            ));
    }
    by_aggregate
}

async fn count_effects(db: &DatabaseConnection, backend: DbBackend) -> Option<i64> {
    let row = db
        .query_one_raw(sea_orm::Statement::from_string(
            backend,
            "SELECT COUNT(*) AS n FROM deliveries",
        ))
        .await
        .ok()??;
    row.try_get("", "n").ok()
}

/// A fresh schema on `server` with the deliveries table, a subscriber
/// fixture, and its inbox on a pool with a short acquire timeout.
async fn on_server(server: &PrivateServer, backend: Backend) -> (TestDb, SubscriberFixture, Inbox) {
    let test = TestDb::with_schema_on(backend, &server.url()).await;
    effects::create_deliveries_table(&test).await;
    let fx = SubscriberFixture::shared().await;
    let outbox = Outbox::new(
        short_pool(&test).await,
        OutboxConfig::default().without_notify(),
    );
    let inbox = Inbox::new(&outbox, &fx.durable).unwrap();
    (test, fx, inbox)
}

/// Waits until `want` messages are applied; returns how long after `back`
/// (the database's return). Fails after 60 s.
async fn until_applied(
    db: &DatabaseConnection,
    backend: DbBackend,
    want: i64,
    back: Instant,
) -> Duration {
    loop {
        let applied = count_effects(db, backend).await;
        if applied == Some(want) {
            return back.elapsed();
        }
        assert!(
            back.elapsed() < Duration::from_secs(60),
            "{applied:?} of {want} effects 60 s after the database's return"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One run on `server`: 2,000 messages published, a consumer in `mode`
/// started, the database crashed once 300 of them were handled, started
/// again after [`OUTAGE`]; checks what the module docs say.
async fn an_outage_spends_no_delivery(server: &mut PrivateServer, backend: Backend, mode: Mode) {
    let (test, fx, inbox) = on_server(server, backend).await;
    for step in 1..=STEPS {
        for n in 0..AGGREGATES {
            let message = fx.message(&AccountCredited { step }, &format!("a-{n}"), step);
            fx.publish(&message).await;
        }
    }
    let sent = AGGREGATES * STEPS as usize;

    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let handler = inbox.handler_boxed(
        move |_: AccountCredited, delivery: Delivery, uow: &mut UnitOfWork| {
            counted.fetch_add(1, Ordering::Relaxed);
            Box::pin(async move { effects::apply_delivery(uow, &delivery).await })
        },
    );
    let builder: SubscriberBuilder = fx
        .subscriber()
        .ack_wait(Duration::from_secs(10))
        .max_deliver(3)
        .backoff(Backoff::exponential(
            Duration::from_millis(100),
            Duration::from_millis(200),
        ))
        .on(handler);
    let builder = match mode {
        Mode::Groups => {
            builder.inbox_groups(InboxGroups::default().max_wait(Duration::from_millis(20)))
        }
        Mode::PerMessage => builder.inbox_per_message(),
    };
    let running = builder.build().await.unwrap().spawn();

    let started = Instant::now();
    while calls.load(Ordering::Relaxed) < 300 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{mode:?}: the consumer did not start applying"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let in_flight = fx.consumer_info().await.num_ack_pending;
    server.stop(Shutdown::Immediate);
    tokio::time::sleep(OUTAGE).await;
    let paused = running.health().check(Duration::from_secs(1)).await.paused;
    server.start_again().await;
    let back = Instant::now();
    let reader = test.connect_again().await;
    let db_backend = test.db_backend();
    let caught_up = until_applied(&reader, db_backend, sent as i64, back).await;
    fx.settled(Duration::from_secs(20)).await;
    running.shutdown().await.unwrap();
    eprintln!(
        "{backend:?} {mode:?}: {in_flight} in flight at the crash, paused during the outage: \
         {paused:?}; everything applied {caught_up:?} after the database's return"
    );

    let applied = applied(&reader, db_backend).await;
    assert_eq!(
        applied.values().map(Vec::len).sum::<usize>(),
        sent,
        "{mode:?}: each message once"
    );
    for (aggregate, effects) in &applied {
        let sequences: Vec<i64> = effects.iter().map(|(sequence, _)| *sequence).collect();
        assert_eq!(
            sequences,
            [1, 2],
            "{mode:?}: {aggregate} once each, in order"
        );
        assert!(
            effects.iter().all(|(_, delivery)| *delivery == 1),
            "{mode:?}: the outage spent a delivery of {aggregate}: {effects:?}"
        );
    }
    let dead = fx.dead_letter_count().await;
    assert_eq!(dead, 0, "{mode:?}: nothing dead-lettered");
    assert!(inbox.holds().await.unwrap().is_empty(), "{mode:?}: no hold");
    assert!(
        paused.is_some(),
        "{mode:?}: the health said the subscriber was paused"
    );
    assert!(
        caught_up <= BACK_WITHIN,
        "{mode:?}: everything applied {caught_up:?} after the database's return (at most {BACK_WITHIN:?})"
    );
    fx.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_outage_spends_no_delivery() {
    let mut server = PrivateServer::start(Backend::Postgres).await;
    an_outage_spends_no_delivery(&mut server, Backend::Postgres, Mode::Groups).await;
    an_outage_spends_no_delivery(&mut server, Backend::Postgres, Mode::PerMessage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mariadb_outage_spends_no_delivery() {
    let mut server = PrivateServer::start(Backend::MySql).await;
    an_outage_spends_no_delivery(&mut server, Backend::MySql, Mode::Groups).await;
    an_outage_spends_no_delivery(&mut server, Backend::MySql, Mode::PerMessage).await;
}

/// A rejected message whose hold cannot be recorded, the database being
/// down, waits: no dead letter, and its aggregate's next message is not
/// applied past it. Once the database is back, the hold is recorded, the
/// message dead-lettered and the next one parked behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_that_cannot_be_recorded_waits_for_the_database() {
    let server = PrivatePostgres::start();
    let test = TestDb::with_schema_on(Backend::Postgres, &server.url()).await;
    let fx = SubscriberFixture::shared().await;
    let outbox = Outbox::new(
        short_pool(&test).await,
        OutboxConfig::default().without_notify(),
    );
    let inbox = Inbox::new(&outbox, &fx.durable).unwrap();
    let handled: Arc<Mutex<Vec<u64>>> = Arc::default();
    let seen = Arc::clone(&handled);
    let running = fx
        .subscriber()
        .max_deliver(3)
        .keep_order(inbox.clone())
        .on(move |event: AccountCredited, _: Delivery| {
            let seen = Arc::clone(&seen);
            async move {
                if event.step == 1 {
                    return Err(HandlerError::permanent("step 1 is refused"));
                }
                seen.lock().unwrap().push(event.step);
                Ok(())
            }
        })
        .build()
        .await
        .unwrap()
        .spawn();
    server.stop(Shutdown::Immediate);
    for step in 1..=2 {
        fx.publish(&fx.message(&AccountCredited { step }, "a-1", step))
            .await;
    }
    // Longer than the attempts at recording the hold made before this
    // change (5, each waiting for the pool's 1-s acquire timeout: ~10 s).
    tokio::time::sleep(Duration::from_secs(13)).await;
    assert_eq!(
        fx.dead_letter_count().await,
        0,
        "not dead-lettered without its hold"
    );
    assert!(
        handled.lock().unwrap().is_empty(),
        "step 2 was not applied past step 1: {:?}",
        handled.lock().unwrap()
    );

    server.start_again();
    fx.dead_letters(1).await;
    let holds = inbox.holds().await.unwrap();
    assert_eq!(holds.len(), 1, "a-1 is held: {holds:?}");
    fx.settled(Duration::from_secs(10)).await;
    assert!(
        handled.lock().unwrap().is_empty(),
        "step 2 is parked behind the hold, not applied: {:?}",
        handled.lock().unwrap()
    );
    running.shutdown().await.unwrap();
    fx.delete().await;
}

/// Messages the server delivers while the reader lease has run out (the
/// database away, the subscriber's message stream dropped) never reach the
/// process; they are handed back at the next stream's first message, so
/// they are applied within seconds of the database's return, not after the
/// ack wait (30 s, the default).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn what_reached_a_dropped_stream_is_applied_soon_after_the_return() {
    let mut server = PrivateServer::start(Backend::Postgres).await;
    let (test, fx, inbox) = on_server(&server, Backend::Postgres).await;
    let handler = inbox.handler_boxed(
        move |_: AccountCredited, delivery: Delivery, uow: &mut UnitOfWork| {
            Box::pin(async move { effects::apply_delivery(uow, &delivery).await })
        },
    );
    let running = fx
        .subscriber()
        .ack_wait(Duration::from_secs(30))
        .on(handler)
        .build()
        .await
        .unwrap()
        .spawn();
    let probe = running.health();
    server.stop(Shutdown::Immediate);
    // Received while paused, and held when the stream is dropped.
    const SENT: i64 = 100;
    for n in 0..SENT / 2 {
        fx.publish(&fx.message(&AccountCredited { step: 1 }, &format!("h-{n}"), 1))
            .await;
    }
    let lapsed = Instant::now();
    while probe.lease_held() != Some(false) {
        assert!(
            lapsed.elapsed() < Duration::from_secs(15),
            "the reader lease did not run out while the database was down"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The dropped stream's last pull request is still at the server for a
    // moment: what is published now is delivered to it, and lost.
    for n in 0..SENT / 2 {
        fx.publish(&fx.message(&AccountCredited { step: 1 }, &format!("t-{n}"), 1))
            .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    server.start_again().await;
    let back = Instant::now();
    let reader = test.connect_again().await;
    let caught_up = until_applied(&reader, test.db_backend(), SENT, back).await;
    eprintln!("everything applied {caught_up:?} after the database's return");
    running.shutdown().await.unwrap();
    fx.delete().await;
    assert!(
        caught_up <= BACK_WITHIN,
        "applied {caught_up:?} after the database's return (at most {BACK_WITHIN:?}): what reached \
         the dropped stream waited for its ack wait"
    );
}
