//! A processor process that dies (SIGKILL) or is paused (SIGSTOP) while it
//! holds leased rows, with a survivor in this process kept busy by its own
//! writers: the survivor publishes the dead peer's rows once their lease
//! runs out (within the lease and a claim, however busy it is; also 1,000+
//! rows held mid-batch, taken over while writes go on), and a
//! paused peer that wakes after its rows were taken over publishes nothing
//! twice (past deduplication) and nothing out of order.

mod processor_support;

use std::time::{Duration, Instant};

use processor_support::{
    RoundWriter, Setup, assert_all_published_cleanly, assert_stream_matches_outbox, drain_all,
    processor_process, row_ids, shared_setup, spawn_processor, stop_writing_and_check,
    wait_for_rows, wait_mid_batch, wait_until, write_orders,
};
use txoutbox_suite::Backend;
use txoutbox_suite::process::ProcessorProcess;

/// The peer's lease: short, so the tests are quick; the survivor uses the
/// defaults (its `poll_interval` is 1 s).
const PEER_LEASE: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_secs(1);

/// A backlog of long histories (1,000 orders of 10 events, tagged `tag`)
/// drained by a peer in batches of 500; calls `meanwhile` once the peer
/// runs, and returns when the peer is mid-batch.
async fn peer_mid_backlog<T>(
    setup: &Setup,
    tag: &str,
    meanwhile: impl FnOnce() -> T,
) -> (txoutbox_suite::process::ProcessorProcess, T) {
    let backlog = write_orders(&setup.outbox, tag, 1_000, 10, 250).await;
    let peer = start_peer(setup, &["--batch-size", "500"]).await;
    let started = meanwhile();
    wait_mid_batch(&setup.stream, backlog, 1_000, 500).await;
    (peer, started)
}

async fn start_peer(setup: &Setup, extra: &[&str]) -> ProcessorProcess {
    let lease = PEER_LEASE.as_millis().to_string();
    let mut args = vec!["--lease-ms", &lease];
    args.extend_from_slice(extra);
    processor_process(&setup.test, &setup.stream.prefix, &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_peers_rows_are_published_by_a_busy_survivor_within_the_lease() {
    let setup = shared_setup(Backend::Postgres).await;
    let (test, stream, outbox, table) = setup.parts();
    // The survivor, busy with this process's writes.
    let survivor = spawn_processor(outbox, stream.jetstream.client(), "/survivor");
    let writer = RoundWriter::spawn(outbox);

    // The peer writes orders in its own process; they are leased to its
    // processor at commit. It is killed while it holds some.
    let mut peer = start_peer(&setup, &["--write-orders", "100000", "--write-tag", "peer"]).await;
    let held = "aggregate_id LIKE 'peer-%' AND status = 0 AND lease_token IS NOT NULL";
    wait_until(
        Duration::from_secs(20),
        "the peer holds rows leased at commit",
        || async { test.count(table, held).await >= 10 },
    )
    .await;
    peer.kill();
    let killed = Instant::now();
    let held_at_kill = test.count(table, held).await;

    // Every aggregate of the dead peer moves again.
    let bound = PEER_LEASE + POLL * 2 + Duration::from_secs(5);
    wait_for_rows(
        test,
        table,
        "aggregate_id LIKE 'peer-%' AND status = 0",
        0,
        bound,
        "every row the peer wrote is published",
    )
    .await;
    let took = killed.elapsed();
    println!(
        "peer killed holding {held_at_kill} rows: all published again {took:?} later \
         (lease {PEER_LEASE:?}, survivor poll {POLL:?})"
    );

    stop_writing_and_check(&setup, writer, survivor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_killed_holding_a_thousand_rows_is_taken_over_within_the_lease() {
    let setup = shared_setup(Backend::Postgres).await;
    let (test, stream, outbox, table) = setup.parts();
    let (mut peer, writer) = peer_mid_backlog(&setup, "k", || RoundWriter::spawn(outbox)).await;
    peer.kill();
    let killed = Instant::now();
    // A statement the dead process had sent may still finish on the server.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = row_ids(test, table, "status = 0 AND lease_expires_at > now()").await;
    assert!(held.len() >= 500, "the peer held only {} rows", held.len());

    // A survivor with default settings takes over while the writer writes.
    let survivor = spawn_processor(outbox, stream.jetstream.client(), "/survivor");
    let ids: Vec<String> = held.iter().map(|id| format!("'{id}'")).collect();
    let still_held = format!("status = 0 AND id IN ({})", ids.join(", "));
    let bound = PEER_LEASE + POLL * 2 + Duration::from_secs(5);
    wait_for_rows(
        test,
        table,
        &still_held,
        0,
        bound,
        "every row the dead peer held is published",
    )
    .await;
    println!(
        "peer killed holding {} rows: all published {:?} after the kill (lease {PEER_LEASE:?})",
        held.len(),
        killed.elapsed()
    );

    stop_writing_and_check(&setup, writer, survivor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_peer_that_wakes_after_a_takeover_publishes_nothing_twice_or_out_of_order() {
    let setup = shared_setup(Backend::Postgres).await;
    let (test, stream, outbox, table) = setup.parts();
    let (mut peer, ()) = peer_mid_backlog(&setup, "b", || ()).await;
    peer.pause();
    let paused = Instant::now();

    // The survivor starts, busy with its own writes, and takes the paused
    // peer's rows over once their lease runs out.
    let survivor = spawn_processor(outbox, stream.jetstream.client(), "/survivor");
    let writer = RoundWriter::spawn(outbox);
    wait_for_rows(
        test,
        table,
        "aggregate_id LIKE 'b-%' AND status = 0",
        0,
        Duration::from_secs(30),
        "the backlog is published without the peer",
    )
    .await;
    println!(
        "backlog published {:?} after the peer was paused (its lease {PEER_LEASE:?})",
        paused.elapsed()
    );

    // The peer wakes with its batches taken over, and works on beside the
    // survivor while writes go on.
    peer.resume();
    tokio::time::sleep(PEER_LEASE).await;
    writer.stop().await;
    drain_all(test, table).await;
    let report = peer.stop();
    println!("the woken peer: {}", report.trim());
    assert_all_published_cleanly(test, table).await;
    assert_stream_matches_outbox(stream, test, table).await;
    survivor.shutdown().await.expect("clean shutdown");
}
