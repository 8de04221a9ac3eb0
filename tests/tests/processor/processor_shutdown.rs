//! Graceful shutdown in the middle of draining a big backlog leaves no row
//! leased: what the broker acknowledged is recorded published, everything
//! else is pending again with no attempt spent, ready for the next processor.

mod processor_support;

use std::collections::HashSet;
use std::time::Duration;

use outbox_nats::JetStreamPublisher;
use outbox_tests::Backend;
use outbox_tests::jetstream::nats_url;
use processor_support::{
    Setup, assert_once_in_order, read_all, row_ids, shared_setup, spawn_processor, wait_for_count,
    wait_until, write_orders,
};
use uuid::Uuid;

const ORDERS: usize = 1_000;
const EVENTS_PER_ORDER: usize = 10;
const TOTAL: usize = ORDERS * EVENTS_PER_ORDER;
const BATCH: usize = 500;

async fn shutdown_mid_drain_leaves_no_lease(backend: Backend) {
    let Setup {
        test,
        stream,
        outbox,
        table,
    } = shared_setup(backend).await;
    let client = stream.jetstream.client();
    write_orders(&outbox, "s", ORDERS, EVENTS_PER_ORDER, 250).await;

    let processor = outbox
        .processor(JetStreamPublisher::new(client, "/shutdown-test"))
        .batch_size(BATCH as u32)
        .build()
        .expect("valid settings")
        .spawn();
    // Shut down while a batch is half published.
    wait_for_count(
        &stream,
        Duration::from_secs(30),
        "a moment mid-batch to shut down at",
        |count| {
            let count = count as usize;
            assert!(count < TOTAL, "drained before a moment mid-batch came");
            count >= TOTAL / 10 && !count.is_multiple_of(BATCH)
        },
    )
    .await;
    let report = processor.shutdown().await.expect("clean stop");

    assert_eq!(
        test.count(
            &table,
            "lease_token IS NOT NULL OR lease_expires_at IS NOT NULL"
        )
        .await,
        0,
        "a row is left leased"
    );
    let published = test.count(&table, "status = 1").await;
    let pending = test.count(&table, "status = 0").await;
    assert!(pending > 0, "the backlog was drained before the shutdown");
    assert_eq!(published + pending, TOTAL as i64, "nothing dead");
    assert_eq!(
        test.count(
            &table,
            "status = 0 AND (attempts <> 0 OR last_error IS NOT NULL)"
        )
        .await,
        0,
        "a shutdown spends no attempt"
    );
    assert_eq!(report.published, published as u64, "{report:?}");
    assert_eq!(report.dead + report.failed, 0, "{report:?}");

    // What the broker acknowledged is exactly what is recorded published.
    let stored = read_all(&stream).await;
    let published_ids = row_ids(&test, &table, "status = 1").await;
    assert_once_in_order(&stored, &published_ids);
    println!("{backend:?}: shut down with {published} published, {pending} pending, {report:?}");

    // A new processor finishes the job.
    let processor = spawn_processor(
        &outbox,
        async_nats::connect(nats_url()).await.expect("nats"),
        "/shutdown-test",
    );
    wait_until(Duration::from_secs(30), "the rest is published", || async {
        test.count(&table, "status = 1").await == TOTAL as i64
    })
    .await;
    let report = processor.shutdown().await.expect("clean stop");
    assert_eq!(report.published, pending as u64);
    let all: HashSet<Uuid> = row_ids(&test, &table, "1=1").await;
    assert_once_in_order(&read_all(&stream).await, &all);
    stream.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_mid_drain_leaves_no_lease_on_postgres() {
    shutdown_mid_drain_leaves_no_lease(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_mid_drain_leaves_no_lease_on_mariadb() {
    shutdown_mid_drain_leaves_no_lease(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_mid_drain_leaves_no_lease_on_sqlite() {
    shutdown_mid_drain_leaves_no_lease(Backend::Sqlite).await;
}
