//! The processor's health counts what is due, on PostgreSQL, MariaDB and
//! SQLite with a real processor and JetStream: a message recorded with a
//! one-hour delay and a dead message with one waiting behind it keep the
//! processor healthy past the oldest-pending threshold, and are counted
//! apart (`delayed`, `blocked_aggregates`, in the health and as the
//! `outbox_delayed` and `outbox_blocked_aggregates` gauges); a due message
//! that nothing holds back but that cannot be published still fails the
//! check.
//!
//! Its own test binary: the gauges are process-wide and unlabelled, and
//! every processor here reports the same counts (each test's database holds
//! one delayed message and one blocked aggregate from before its processor
//! starts), so the three tests can run side by side and read them.

mod processor_support;

use std::sync::OnceLock;
use std::time::Duration;

use chrono::Utc;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use processor_support::{quick_retry, save_new_order, save_order, shared_setup, spawn_tuned};
use processor_support::{wait_all_published, wait_until};
use sea_orm::ConnectionTrait;
use tokio::time::Instant;
use txoutbox_core::AggregateRoot;
use txoutbox_core::processor::{HealthThresholds, metrics};
use txoutbox_sea_orm::{Outbox, OutboxConfig};
use txoutbox_suite::Backend;
use txoutbox_suite::orders::{Order, OrderAmended};

/// The health check's limit on the oldest due message's wait.
const THRESHOLD: Duration = Duration::from_secs(2);

/// The process-wide debugging recorder, installed before any processor
/// records.
fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("the only recorder");
        snapshotter
    })
}

/// The gauges `names` as one snapshot has them (a snapshot drains them:
/// each reads as set since the last one, by any processor of the process).
fn gauges<const N: usize>(names: [&str; N]) -> [Option<f64>; N] {
    let snapshot = snapshotter().snapshot().into_vec();
    names.map(|name| {
        snapshot
            .iter()
            .find(|(key, ..)| key.key().name() == name)
            .and_then(|(.., value)| match value {
                DebugValue::Gauge(value) => Some(value.into_inner()),
                _ => None,
            })
    })
}

async fn delayed_and_blocked_do_not_fail_health_a_stall_does(backend: Backend) {
    snapshotter();
    let setup = shared_setup(backend).await;
    let (test, outbox, table) = (&setup.test, &setup.outbox, setup.table.as_str());

    // held-1: its first event dead (as a refused publish leaves it), its
    // second waiting behind it. later-1: placed, then a reminder in an hour.
    let mut held = Order::place("held-1", 100).expect("record");
    held.amend(150).expect("record");
    save_order(outbox, &mut held).await;
    test.db
        .execute_unprepared(&format!(
            "UPDATE {table} SET status = 2, attempts = 1, last_error = 'refused' \
             WHERE aggregate_id = 'held-1' AND sequence = 1"
        ))
        .await
        .expect("held-1#1 dead");
    let mut later = Order::place("later-1", 100).expect("record");
    later
        .record_delayed(
            OrderAmended {
                order_id: "later-1".into(),
                total_cents: 150,
            },
            Utc::now() + chrono::Duration::hours(1),
        )
        .expect("record");
    save_order(outbox, &mut later).await;
    save_new_order(outbox, "free-1", 5).await;
    let written = Instant::now();

    let processor = spawn_tuned(
        outbox,
        setup.stream.jetstream.client(),
        "/backlog-age",
        |builder| {
            builder
                .poll_interval(Duration::from_millis(100))
                .stats_interval(Some(Duration::from_millis(100)))
                .retry(quick_retry(1000))
        },
    );
    let probe = processor.health();
    let limits = HealthThresholds::default()
        .max_claim_gap(Duration::from_secs(2))
        .max_oldest_pending_age(THRESHOLD);
    // later-1#1 and free-1#1: what is due and free goes out.
    wait_all_published(test, table, 2).await;

    // Past the threshold (and a backlog refresh after it), still healthy.
    tokio::time::sleep((THRESHOLD + Duration::from_millis(300)).saturating_sub(written.elapsed()))
        .await;
    let health = probe.check(&limits);
    assert!(health.healthy, "{health:?}");
    assert_eq!(
        (
            health.delayed,
            health.blocked_aggregates,
            health.oldest_pending_age
        ),
        (1, 1, None),
        "later-1#2 delayed, held-1#2 behind a dead message, nothing else pending: {health:?}"
    );
    // Every backlog refresh (every 100 ms) sets both gauges.
    wait_until(
        Duration::from_secs(5),
        "the gauges show one delayed message and one blocked aggregate",
        || async {
            gauges([metrics::DELAYED, metrics::BLOCKED_AGGREGATES]) == [Some(1.0), Some(1.0)]
        },
    )
    .await;
    assert_eq!(test.count(table, "status = 0").await, 2);

    // A due message that nothing holds back but no stream captures: refused
    // and retried, it waits past the threshold while claims go on.
    let nowhere = Outbox::new(
        test.db.clone(),
        OutboxConfig::default()
            .with_subject_prefix(format!("{}-nowhere", setup.stream.prefix))
            .expect("prefix"),
    );
    save_new_order(&nowhere, "stuck-1", 5).await;
    wait_until(
        THRESHOLD + Duration::from_secs(5),
        "the stuck message fails the check",
        || async { !probe.check(&limits).healthy },
    )
    .await;
    let stalled = probe.check(&limits);
    assert!(
        stalled
            .problems
            .iter()
            .any(|p| p.contains("oldest pending message that is due")),
        "{stalled:?}"
    );
    assert!(
        stalled
            .oldest_pending_age
            .is_some_and(|age| age > THRESHOLD),
        "{stalled:?}"
    );
    assert_eq!((stalled.delayed, stalled.blocked_aggregates), (1, 1));

    processor.shutdown().await.expect("clean shutdown");
}

txoutbox_suite::backend_tests!(delayed_and_blocked_do_not_fail_health_a_stall_does:
    postgres => Postgres,
    mysql => MySql,
    sqlite => Sqlite,
);
