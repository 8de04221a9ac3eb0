//! One reader stays one reader: a subscriber that keeps order holds a lease
//! in its inbox's database (`SubscriberBuilder::reader_lease`) besides what
//! the broker says, so a second process never applies the durable's
//! messages beside the first.
//!
//! - Three replicas of a plain ordered subscriber (no failover) started in
//!   the same instant all pass the build's `DurableInUse` check (nobody
//!   pulls yet); without the lease JetStream spreads the durable's messages
//!   over all three and one aggregate's events run side by side.
//! - Three failover replicas on a 3-node nats-server 2.14 cluster, one
//!   aggregate's event failing (retried) for 20 s, the consumer's leader
//!   stepped down every few seconds meanwhile: a leader change clears the
//!   pin, so without the lease a standby is pinned and gets the failing
//!   event while the first process still holds the later ones and, once it
//!   gives up waiting, applies them before it.
//!
//! - One process, the broker frozen (SIGSTOP) while one aggregate's event
//!   is away for a retry, past the lane's grace: the durable's one reader
//!   waits for the late redelivery instead of applying the aggregate's
//!   later events before it.
//!
//! The consumers apply each event as an `effects` row in the inbox's
//! transaction, after locking the event's aggregate
//! (`effects::apply_locked`), so events of one aggregate applied side by
//! side commit in the order they wrote their rows and disorder shows. Every
//! effect must be applied once, in its aggregate's order, by one process.

#[path = "../processor/processor_support/mod.rs"]
mod processor_support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use processor_support::{
    Setup, current_cluster_setup, private_setup, spawn_processor, wait_all_published, wait_until,
    write_orders,
};
use txoutbox_core::Delivery;
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig};
use txoutbox_suite::effects;
use txoutbox_suite::nats::{NatsServer, current_nats_server};
use txoutbox_suite::orders::OrderPlaced;
use txoutbox_suite::process::ProcessorProcess;
use txoutbox_suite::subscriber::{SubscriberFixture, eventually};
use txoutbox_suite::{Backend, TestDb};

const DURABLE: &str = "effects";

/// Milliseconds since the Unix epoch.
fn unix_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch");
    u64::try_from(since.as_millis()).expect("milliseconds fit")
}

/// Starts `outbox-test-consumer` replicas labelled `labels` on `nats`, each
/// with `args`, one after the other.
async fn replicas(
    setup: &Setup,
    nats: &str,
    labels: &[&str],
    args: &[String],
) -> Vec<ProcessorProcess> {
    let mut started = Vec::new();
    for label in labels {
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.extend([
            "--stream",
            &setup.stream.name,
            "--durable",
            DURABLE,
            "--locked-effects",
            "--label",
            label,
        ]);
        let replica = ProcessorProcess::try_start_on(
            env!("CARGO_BIN_EXE_outbox-test-consumer"),
            &setup.test,
            nats,
            &setup.stream.prefix,
            &args,
        )
        .await
        .unwrap_or_else(|output| panic!("replica {label} did not start: {output}"));
        started.push(replica);
    }
    started
}

/// Publishes `orders` orders of `events` events each to the setup's
/// stream through `client`; returns how many events.
async fn publish_orders(
    setup: &Setup,
    client: async_nats::Client,
    orders: usize,
    events: usize,
) -> i64 {
    effects::create_table(&setup.test).await;
    let total = write_orders(&setup.outbox, "r", orders, events, 50).await as i64;
    let processor = spawn_processor(&setup.outbox, client, "/one-reader");
    wait_all_published(&setup.test, &setup.table, total).await;
    processor.shutdown().await.expect("clean shutdown");
    total
}

/// The processes that applied effects.
async fn appliers(setup: &Setup) -> Vec<String> {
    setup
        .test
        .rows("SELECT DISTINCT process FROM effects ORDER BY process")
        .await
        .iter()
        .map(|row| row.try_get("", "process").expect("process"))
        .collect()
}

/// Waits until `total` effects are applied, then asserts each once and in
/// its aggregate's order, by one process.
async fn assert_one_reader(setup: &Setup, total: i64, within: Duration) {
    wait_until(within, "every event is applied", || async {
        setup.test.count("effects", "1=1").await >= total
    })
    .await;
    // A second reader's copies would land meanwhile.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let appliers = appliers(setup).await;
    println!("applied by {appliers:?}");
    effects::assert_each_applied_once_in_order(&setup.test, &setup.table).await;
    assert_eq!(appliers.len(), 1, "one process applies: {appliers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_started_in_the_same_instant_apply_each_event_once_in_order() {
    let server = NatsServer::builder()
        .binary(current_nats_server().display().to_string())
        .start()
        .await
        .expect("a private nats-server 2.14");
    let setup = private_setup(&server, Backend::Postgres, "one_reader_start").await;
    let client = server.connect().await.expect("a client");
    let total = publish_orders(&setup, client, 300, 10).await;

    // Far enough ahead for the three processes to be up and waiting: each
    // says `started` before it waits, and builds its subscriber at `at`.
    let at = unix_ms() + 2_500;
    let args = [
        "--start-at-ms".to_owned(),
        at.to_string(),
        "--ack-wait-ms".to_owned(),
        "15000".to_owned(),
    ];
    let started = Instant::now();
    let running = replicas(&setup, &server.url(), &["a", "b", "c"], &args).await;
    assert_one_reader(&setup, total, Duration::from_secs(40)).await;
    println!(
        "{total} effects applied by one process {:.1} s after three replicas started at once",
        started.elapsed().as_secs_f64()
    );
    let leases = setup
        .test
        .rows("SELECT consumer, holder, token FROM outbox_inbox_lease")
        .await;
    assert_eq!(leases.len(), 1, "one lease row, for the durable");
    let reports: Vec<String> = running.into_iter().map(ProcessorProcess::stop).collect();
    let built = reports
        .iter()
        .filter(|report| report.contains("stopped=1"))
        .count();
    println!("{built} of 3 replicas passed the build's check at once: {reports:?}");
    assert!(
        built >= 2,
        "the race was not run: only {built} replica passed the build's check ({reports:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_leader_change_while_an_event_retries_keeps_one_reader() {
    let (cluster, setup) = current_cluster_setup("one_reader_leader").await;
    let client = cluster.connect().await.expect("a client of the cluster");
    let total = publish_orders(&setup, client.clone(), 40, 10).await;

    // Order r-7's fifth event fails (and is retried every second) for 20 s
    // from now; the leader changes meanwhile.
    let failing_for = Duration::from_secs(20);
    let until = unix_ms() + u64::try_from(failing_for.as_millis()).expect("fits");
    let args = [
        "--failover".to_owned(),
        "--fail".to_owned(),
        format!("r-7:5:{until}"),
        "--max-deliver".to_owned(),
        "1000".to_owned(),
        "--backoff-ms".to_owned(),
        "1000".to_owned(),
        "--ack-wait-ms".to_owned(),
        "4000".to_owned(),
    ];
    let started = Instant::now();
    let running = replicas(&setup, &cluster.urls(), &["a", "b", "c"], &args).await;
    // Everything but r-7's events from the fifth on is applied.
    wait_until(
        Duration::from_secs(20),
        "every other event is applied",
        || async { setup.test.count("effects", "1=1").await >= total - 6 },
    )
    .await;
    let stepdown = format!(
        "$JS.API.CONSUMER.LEADER.STEPDOWN.{}.{DURABLE}",
        setup.stream.name
    );
    let mut stepdowns = 0;
    while started.elapsed() < failing_for - Duration::from_secs(4) {
        match client.request(stepdown.clone(), "".into()).await {
            Ok(answer) => {
                stepdowns += 1;
                tracing::info!(answer = %String::from_utf8_lossy(&answer.payload), "consumer leader stepped down");
            }
            Err(err) => tracing::warn!(error = %err, "stepdown request"),
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    assert!(stepdowns > 0, "no stepdown was answered");
    assert_one_reader(&setup, total, Duration::from_secs(30)).await;
    println!(
        "{total} effects applied once and in order across {stepdowns} consumer leader changes, \
         {:.1} s after the replicas started",
        started.elapsed().as_secs_f64()
    );
    for replica in running {
        replica.stop();
    }
}

/// The durable's one reader waits for a retry that comes back late. Order
/// r-7's fifth event fails for 8 s (nakked with a 200-ms backoff, 1-s ack
/// wait: the lane's grace is 2.2 s past each nak); the broker is frozen
/// (SIGSTOP) for 6 s meanwhile, so the retry cannot come back within the
/// grace. A lane that gives up on it by time applies r-7's later events
/// during the freeze, before it (before the fix: `("r-7", [1, 2, 3, 4, 6,
/// 7, 8, 9, 10, 5])`); the one reader asks the server instead, and waits
/// while the message is unsettled and in the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_back_late_from_a_frozen_broker_still_runs_first() {
    let mut server = NatsServer::builder()
        .start()
        .await
        .expect("a private nats-server");
    let setup = private_setup(&server, Backend::Postgres, "one_reader_late").await;
    let client = server.connect().await.expect("a client");
    let total = publish_orders(&setup, client, 20, 10).await;
    let until = unix_ms() + 8_000;
    let args = [
        "--fail".to_owned(),
        format!("r-7:5:{until}"),
        "--max-deliver".to_owned(),
        "1000".to_owned(),
        "--backoff-ms".to_owned(),
        "200".to_owned(),
        "--ack-wait-ms".to_owned(),
        "1000".to_owned(),
    ];
    let running = replicas(&setup, &server.url(), &["a"], &args).await;
    wait_until(
        Duration::from_secs(20),
        "every other event is applied",
        || async { setup.test.count("effects", "1=1").await >= total - 6 },
    )
    .await;
    // The freeze must find r-7's fifth event failing, away for a retry.
    let left = until.saturating_sub(unix_ms());
    assert!(
        left > 1_000,
        "the other events took too long: r-7's fifth event stops failing in {left} ms, \
         too soon to freeze the broker while it is away (a loaded machine; run again)"
    );
    let r7 = setup.test.count("effects", "aggregate_id = 'r-7'").await;
    assert_eq!(r7, 4, "r-7's fifth event is not applied before the freeze");
    server.freeze().expect("nats-server frozen");
    tokio::time::sleep(Duration::from_secs(6)).await;
    server.thaw().expect("nats-server continued");
    let thawed = Instant::now();
    assert_one_reader(&setup, total, Duration::from_secs(30)).await;
    println!(
        "{total} effects applied once and in order; r-7's retry, back late from a 6-s broker \
         freeze, ran first ({:.1} s after the thaw)",
        thawed.elapsed().as_secs_f64()
    );
    for replica in running {
        replica.stop();
    }
}

/// Two subscribers of one durable built before either runs (both pass the
/// build's check): the one that takes the reader lease reads, the other
/// stands by. Both are ready, their health tells which is which, and when
/// the reader stops in order the standby takes the lease at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_is_ready_says_so_and_takes_over_when_the_reader_stops() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default().without_notify());
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox, fx.durable.clone()).expect("an inbox");
    let build = || async {
        fx.subscriber()
            .on(inbox.handler_boxed(|_: OrderPlaced, _: Delivery, _| Box::pin(async { Ok(()) })))
            .build()
            .await
            .expect("a subscriber")
    };
    let (one, other) = (build().await, build().await);
    let (one, other) = (one.spawn(), other.spawn());
    eventually(
        "one of them takes the lease",
        Duration::from_secs(10),
        || async {
            one.health().lease_held() == Some(true) || other.health().lease_held() == Some(true)
        },
    )
    .await;
    let timeout = Duration::from_secs(2);
    let (first, second) = (
        one.health().check(timeout).await,
        other.health().check(timeout).await,
    );
    assert!(first.ready && second.ready, "{first:?} {second:?}");
    let mut held = [first.lease_held, second.lease_held];
    held.sort();
    assert_eq!(held, [Some(false), Some(true)], "one reader, one standby");
    let (reader, standby) = if first.lease_held == Some(true) {
        (one, other)
    } else {
        (other, one)
    };
    let stopped = Instant::now();
    reader.shutdown().await.expect("clean shutdown");
    eventually(
        "the standby takes the lease",
        Duration::from_secs(5),
        || async { standby.health().lease_held() == Some(true) },
    )
    .await;
    println!(
        "the standby read {:.2} s after the reader began to stop",
        stopped.elapsed().as_secs_f64()
    );
    standby.shutdown().await.expect("clean shutdown");
    fx.delete().await;
}
