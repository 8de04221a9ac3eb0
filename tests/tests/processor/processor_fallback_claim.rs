//! The ordinary claim runs at least once per `poll_interval`, whatever else
//! wakes the processor. Here a processor is kept busy by its own process's
//! commits (its fast path: claims by id, or rows leased at commit), while
//! another writer, which the processor hears nothing from (no `NOTIFY`: on
//! MariaDB and SQLite there is none, on PostgreSQL it is turned off), adds
//! rows only an ordinary claim can find. They must be published within a
//! few poll intervals while the local traffic goes on, not once it stops.

mod processor_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use processor_support::{
    assert_stream_matches_outbox, save_new_order, shared_setup, spawn_tuned,
    wait_all_published_within, wait_for_rows, write_orders,
};
use txoutbox_sea_orm::Outbox;
use txoutbox_suite::Backend;

const POLL: Duration = Duration::from_millis(300);

async fn foreign_rows_are_found_while_local_traffic_goes_on(backend: Backend) {
    let (test, stream, outbox, table) = shared_setup(backend).await.into_parts();
    let processor = spawn_tuned(
        &outbox,
        stream.jetstream.client(),
        "/fallback-test",
        |builder| builder.poll_interval(POLL),
    );

    // Steady local traffic: a new order every 10 ms until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let local_written = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (outbox, stop, written) = (
            outbox.clone(),
            Arc::clone(&stop),
            Arc::clone(&local_written),
        );
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                save_new_order(&outbox, &format!("local-{n}"), 100).await;
                written.fetch_add(1, Ordering::Relaxed);
                n += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Another writer the processor hears nothing from.
    let foreign = Outbox::new(
        test.connect_again().await,
        outbox.config().clone().without_notify(),
    );
    let foreign_rows = write_orders(&foreign, "foreign", 20, 2, 5).await;
    let written_at = Instant::now();
    wait_for_rows(
        &test,
        &table,
        "aggregate_id LIKE 'foreign-%' AND status = 1",
        foreign_rows as i64,
        Duration::from_secs(5),
        "the other writer's rows are published while local traffic goes on",
    )
    .await;
    let found_after = written_at.elapsed();
    let before_stop = local_written.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    writer.await.expect("local writer");
    assert!(
        before_stop >= 20,
        "local traffic was going on ({before_stop} local orders)"
    );
    println!(
        "{backend:?}: {foreign_rows} foreign rows published {found_after:?} after their commit, with {before_stop} local orders written meanwhile"
    );
    let total = test.count(&table, "1=1").await;
    wait_all_published_within(&test, &table, total, Duration::from_secs(10)).await;
    processor.shutdown().await.expect("clean stop");
    assert_stream_matches_outbox(&stream, &test, &table).await;
    stream.delete().await;
}

txoutbox_suite::each_backend!(empty: foreign_rows_are_found_while_local_traffic_goes_on);
