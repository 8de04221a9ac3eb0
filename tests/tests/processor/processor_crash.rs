//! A processor process killed with SIGKILL in the middle of a backlog, and
//! another one started: every event reaches the stream exactly once (the
//! dead process's acknowledged-but-unrecorded messages are published again
//! and JetStream's deduplication absorbs them), in per-aggregate order.

mod processor_support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use processor_support::{
    assert_once_in_order, processor_process, read_all, row_ids, shared_setup,
    wait_all_published_within, wait_mid_batch, write_orders,
};
use txoutbox_suite::process::{ProcessorProcess, report_field};
use txoutbox_suite::{Backend, TestDb};
use uuid::Uuid;

const ORDERS: usize = 2_000;
const EVENTS_PER_ORDER: usize = 10;
const TOTAL: usize = ORDERS * EVENTS_PER_ORDER;
/// Short, so the second process can take over the dead one's batches soon.
const LEASE_MS: u64 = 2_000;

/// Starts a processor process with the crash test's lease and batch size.
async fn start_processor(test: &TestDb, prefix: &str) -> ProcessorProcess {
    let lease = LEASE_MS.to_string();
    processor_process(test, prefix, &["--lease-ms", &lease, "--batch-size", "500"]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_processor_process_loses_and_duplicates_nothing() {
    let (test, stream, outbox, table) = shared_setup(Backend::Postgres).await.into_parts();
    let written = write_orders(&outbox, "c", ORDERS, EVENTS_PER_ORDER, 250).await;
    assert_eq!(written, TOTAL);

    // The first process: killed once part of the backlog is in the stream.
    let mut first = start_processor(&test, &stream.prefix).await;
    // Killed while a batch is half published: past a fifth of the backlog,
    // at a count that is not a whole number of (500-message) batches.
    wait_mid_batch(&stream, TOTAL, TOTAL / 5, 500).await;
    first.kill();
    // A statement the dead process had sent may still finish on the server.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let in_stream_at_kill = stream.count().await as usize;
    assert!(
        in_stream_at_kill < TOTAL,
        "the first process drained everything before it was killed: not a crash mid-backlog"
    );
    let leased = test.count(&table, "lease_token IS NOT NULL").await;
    let pending_at_kill = test.count(&table, "status = 0").await as u64;
    assert!(
        leased > 0,
        "the killed process held no lease: it was not mid-batch"
    );
    // Acknowledged by the broker, not yet recorded: the second process
    // publishes these again, and deduplication must absorb them.
    let stored_ids: HashSet<Uuid> = read_all(&stream)
        .await
        .iter()
        .map(|(_, m)| *m.id.as_uuid())
        .collect();
    let unrecorded = row_ids(&test, &table, "status = 0")
        .await
        .intersection(&stored_ids)
        .count();
    assert!(
        unrecorded > 0,
        "killed mid-batch, yet no message is acknowledged but unrecorded"
    );
    println!(
        "killed with {in_stream_at_kill} of {TOTAL} in the stream, {leased} rows leased, \
         {unrecorded} acknowledged but unrecorded"
    );

    // The second process takes over once the dead one's leases run out.
    let started = Instant::now();
    let second = start_processor(&test, &stream.prefix).await;
    wait_all_published_within(&test, &table, TOTAL as i64, Duration::from_secs(40)).await;
    let report = second.stop();
    println!(
        "second process drained the rest in {:?}: {}",
        started.elapsed(),
        report.trim()
    );
    let published = report_field(&report, "published");
    assert_eq!(
        published, pending_at_kill,
        "the second process publishes (or has deduplicated) exactly what was left pending"
    );

    let stored = read_all(&stream).await;
    assert_once_in_order(&stored, &row_ids(&test, &table, "1=1").await);
    assert_eq!(test.count(&table, "lease_token IS NOT NULL").await, 0);
    assert_eq!(test.count(&table, "status <> 1 OR attempts <> 0").await, 0);
    stream.delete().await;
}
