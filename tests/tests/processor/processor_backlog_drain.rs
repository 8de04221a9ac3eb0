//! A claim that comes back full is followed by the next one at once, not
//! after `poll_interval`: a backlog of several batches, pending before the
//! processor starts (nothing wakes it but its own claims), drains with a
//! 5-s poll interval in well under 5 s, on every backend.

mod processor_support;

use std::time::{Duration, Instant};

use processor_support::{
    assert_all_published_cleanly, assert_stream_matches_outbox, shared_setup, spawn_tuned,
    wait_all_published_within, write_orders,
};
use txoutbox_suite::Backend;

const BATCH: u32 = 100;
const POLL: Duration = Duration::from_secs(5);

async fn a_backlog_of_several_batches_drains_without_waiting_for_the_poll(backend: Backend) {
    let (test, stream, outbox, table) = shared_setup(backend).await.into_parts();
    // 3.5 batches, one message per aggregate, written before the start.
    let written = write_orders(&outbox, "backlog", 350, 1, 50).await as i64;
    let started = Instant::now();
    let processor = spawn_tuned(
        &outbox,
        stream.jetstream.client(),
        "/backlog-test",
        |builder| builder.batch_size(BATCH).poll_interval(POLL),
    );
    wait_all_published_within(&test, &table, written, POLL).await;
    let drained = started.elapsed();
    let report = processor.shutdown().await.expect("clean stop");
    println!(
        "{backend:?}: {written} rows in {} batches of up to {BATCH} drained in {drained:?} (poll interval {POLL:?})",
        report.batches
    );
    assert!(
        report.batches >= 4,
        "the backlog took several claims: {report:?}"
    );
    assert!(
        drained < POLL / 2,
        "{written} rows drained in {drained:?}: a full claim waited for the poll interval"
    );
    assert_all_published_cleanly(&test, &table).await;
    assert_stream_matches_outbox(&stream, &test, &table).await;
    stream.delete().await;
}

txoutbox_suite::each_backend!(empty: a_backlog_of_several_batches_drains_without_waiting_for_the_poll);
