//! A hung broker (a private nats-server frozen with SIGSTOP: connected, but
//! silent). Acks time out, which must count as the broker's failure (no
//! attempt spent); a shutdown meanwhile gives up on the acks at its deadline
//! and leaves nothing leased; and the publishes that reach the server late,
//! once it continues, are absorbed by deduplication.

mod processor_support;

use std::time::{Duration, Instant};

use processor_support::{
    assert_all_published_cleanly, assert_stream_matches_outbox, drain_all, private_server_setup,
    spawn_processor, spawn_tuned, traffic_on_private_server, wait_all_published, wait_mid_batch,
    write_orders,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_while_the_broker_hangs_leaves_no_lease() {
    let (mut server, setup) = private_server_setup("hang").await;
    let (test, stream, outbox, table) = setup.into_parts();
    let total = write_orders(&outbox, "h", 500, 10, 250).await as i64;
    let processor = spawn_tuned(
        &outbox,
        server
            .connect()
            .await
            .expect("a client of the private nats-server"),
        "/hang-test",
        |builder| {
            builder
                .batch_size(500)
                .shutdown_timeout(Duration::from_millis(500))
        },
    );
    wait_mid_batch(&stream, total as usize, 500, 500).await;
    server.freeze().expect("SIGSTOP");
    tokio::time::sleep(Duration::from_millis(200)).await; // publishes pile up
    let stopping = Instant::now();
    let report = processor.shutdown().await.expect("clean stop");
    let took = stopping.elapsed();
    println!("stopped in {took:?} with the broker hung: {report:?}");
    assert!(
        took < Duration::from_secs(3),
        "the shutdown deadline was not kept: {took:?}"
    );
    assert!(report.released > 0, "{report:?}");
    assert_eq!(
        test.count(&table, "lease_token IS NOT NULL").await,
        0,
        "a row is left leased"
    );
    assert_eq!(
        test.count(&table, "status <> 1 AND (status <> 0 OR attempts <> 0)")
            .await,
        0,
        "everything unpublished is pending, untried"
    );
    assert_eq!(
        test.count(&table, "status = 1").await as u64,
        report.published
    );

    // The server continues; what it receives late is already in the stream
    // or will be deduplicated when the next processor publishes it again.
    server.thaw().expect("SIGCONT");
    let processor = spawn_processor(
        &outbox,
        server
            .connect()
            .await
            .expect("a client of the private nats-server"),
        "/hang-test",
    );
    wait_all_published(&test, &table, total).await;
    processor.shutdown().await.expect("clean stop");
    assert_stream_matches_outbox(&stream, &test, &table).await;
    stream.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_broker_spends_no_attempt_and_keeps_order() {
    let (mut server, setup, processor, writer) = traffic_on_private_server("stall").await;
    let (test, stream, _outbox, table) = setup.into_parts();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Longer than the publisher's 5 s ack timeout.
    server.freeze().expect("SIGSTOP");
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        test.count(&table, "attempts <> 0 OR status = 2").await,
        0,
        "ack timeouts spent attempts"
    );
    server.thaw().expect("SIGCONT");
    tokio::time::sleep(Duration::from_millis(500)).await;
    writer.stop().await;
    let total = drain_all(&test, &table).await;
    let report = processor.shutdown().await.expect("clean stop");
    println!("{total} events: {report:?}");
    assert_stream_matches_outbox(&stream, &test, &table).await;
    assert_all_published_cleanly(&test, &table).await;
    assert_eq!((report.failed, report.dead), (0, 0), "{report:?}");
    stream.delete().await;
}
