//! Graceful shutdown in the middle of draining a big backlog leaves no row
//! leased: what the broker acknowledged is recorded published, everything
//! else is pending again with no attempt spent, ready for the next processor.

mod processor_support;

use std::collections::HashSet;
use std::time::Duration;

use processor_support::{
    assert_once_in_order, read_all, row_ids, shared_setup, spawn_processor, spawn_tuned,
    wait_for_rows, wait_mid_batch, write_orders,
};
use txoutbox_suite::Backend;
use txoutbox_suite::jetstream::nats_url;
use uuid::Uuid;

const ORDERS: usize = 1_000;
const EVENTS_PER_ORDER: usize = 10;
const TOTAL: usize = ORDERS * EVENTS_PER_ORDER;
const BATCH: usize = 500;

async fn shutdown_mid_drain_leaves_no_lease(backend: Backend) {
    let (test, stream, outbox, table) = shared_setup(backend).await.into_parts();
    let client = stream.jetstream.client();
    write_orders(&outbox, "s", ORDERS, EVENTS_PER_ORDER, 250).await;

    let processor = spawn_tuned(&outbox, client, "/shutdown-test", |builder| {
        builder.batch_size(BATCH as u32)
    });
    // Shut down while a batch is half published.
    wait_mid_batch(&stream, TOTAL, TOTAL / 10, BATCH).await;
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
    wait_for_rows(
        &test,
        &table,
        "status = 1",
        TOTAL as i64,
        Duration::from_secs(30),
        "the rest is published",
    )
    .await;
    let report = processor.shutdown().await.expect("clean stop");
    assert_eq!(report.published, pending as u64);
    let all: HashSet<Uuid> = row_ids(&test, &table, "1=1").await;
    assert_once_in_order(&read_all(&stream).await, &all);
    stream.delete().await;
}

txoutbox_suite::backend_tests!(shutdown_mid_drain_leaves_no_lease:
    shutdown_mid_drain_leaves_no_lease_on_postgres => Postgres,
    shutdown_mid_drain_leaves_no_lease_on_mariadb => MySql,
    shutdown_mid_drain_leaves_no_lease_on_sqlite => Sqlite,
);
