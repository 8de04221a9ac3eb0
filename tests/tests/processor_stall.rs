//! A hung broker (a private nats-server frozen with SIGSTOP: connected, but
//! silent). Acks time out, which must count as the broker's failure (no
//! attempt spent); a shutdown meanwhile gives up on the acks at its deadline
//! and leaves nothing leased; and the publishes that reach the server late,
//! once it continues, are absorbed by deduplication.

mod processor_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use outbox_nats::JetStreamPublisher;
use outbox_sea_orm::{Outbox, OutboxConfig};
use outbox_tests::nats::NatsServer;
use outbox_tests::{Backend, TestDb};
use processor_support::{
    amend_order, assert_once_in_order, file_stream, read_all, row_ids, wait_until, write_orders,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_while_the_broker_hangs_leaves_no_lease() {
    let mut server = NatsServer::start().await;
    let test = TestDb::with_schema(Backend::Postgres).await;
    let stream = file_stream(server.connect().await, "hang").await;
    let outbox = Outbox::new(
        test.db.clone(),
        OutboxConfig::default()
            .with_subject_prefix(&stream.prefix)
            .expect("prefix"),
    );
    let table = outbox.config().table().as_str().to_owned();
    let total = write_orders(&outbox, "h", 500, 10, 250).await as i64;
    let processor = outbox
        .processor(JetStreamPublisher::new(
            server.connect().await,
            "/hang-test",
        ))
        .batch_size(500)
        .shutdown_timeout(Duration::from_millis(500))
        .build()
        .expect("valid settings")
        .spawn();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let count = stream.count().await;
        if count >= 500 && !count.is_multiple_of(500) {
            break;
        }
        assert!(
            (count as i64) < total && Instant::now() < deadline,
            "{count} of {total}"
        );
    }
    server.pause();
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
    server.resume();
    let processor = outbox
        .processor(JetStreamPublisher::new(
            server.connect().await,
            "/hang-test",
        ))
        .build()
        .expect("valid settings")
        .spawn();
    wait_until(
        Duration::from_secs(30),
        "every row is published",
        || async { test.count(&table, "status = 1").await == total },
    )
    .await;
    processor.shutdown().await.expect("clean stop");
    assert_once_in_order(
        &read_all(&stream).await,
        &row_ids(&test, &table, "1=1").await,
    );
    stream.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_broker_spends_no_attempt_and_keeps_order() {
    let mut server = NatsServer::start().await;
    let test = TestDb::with_schema(Backend::Postgres).await;
    let stream = file_stream(server.connect().await, "stall").await;
    let outbox = Outbox::new(
        test.db.clone(),
        OutboxConfig::default()
            .with_subject_prefix(&stream.prefix)
            .expect("prefix"),
    );
    let table = outbox.config().table().as_str().to_owned();
    let processor = outbox
        .processor(JetStreamPublisher::new(
            server.connect().await,
            "/stall-test",
        ))
        .batch_size(100)
        .unavailable_backoff(Duration::from_millis(50), Duration::from_millis(500))
        .build()
        .expect("valid settings")
        .spawn();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (outbox, stop) = (outbox.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut round = 0;
            while !stop.load(Ordering::Acquire) {
                write_orders(&outbox, &format!("r{round}"), 5, 2, 5).await;
                if round >= 3 {
                    for n in 0..5 {
                        amend_order(&outbox, &format!("r{}-{n}", round - 3), 2).await;
                    }
                }
                round += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Longer than the publisher's 5 s ack timeout.
    server.pause();
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        test.count(&table, "attempts <> 0 OR status = 2").await,
        0,
        "ack timeouts spent attempts"
    );
    server.resume();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Release);
    writer.await.expect("writer");
    let total = test.count(&table, "1=1").await;
    wait_until(
        Duration::from_secs(30),
        "every row is published",
        || async { test.count(&table, "status = 1").await == total },
    )
    .await;
    let report = processor.shutdown().await.expect("clean stop");
    println!("{total} events: {report:?}");
    assert_once_in_order(
        &read_all(&stream).await,
        &row_ids(&test, &table, "1=1").await,
    );
    assert_eq!(
        test.count(
            &table,
            "status <> 1 OR attempts <> 0 OR lease_token IS NOT NULL"
        )
        .await,
        0
    );
    assert_eq!((report.failed, report.dead), (0, 0), "{report:?}");
    stream.delete().await;
}
