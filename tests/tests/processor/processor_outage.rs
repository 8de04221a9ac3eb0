//! A broker outage while events are being written and published: a private
//! nats-server is killed for 10 s, then restarted on the same port and
//! store. Every event ends up in the stream exactly once, in per-aggregate
//! order, nothing goes dead, and the outage spends no attempt.

mod processor_support;

use std::time::{Duration, Instant};

use processor_support::{
    assert_all_published_cleanly, assert_stream_matches_outbox, traffic_on_private_server,
    wait_all_published, wait_until, write_orders,
};

const OUTAGE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_loses_nothing_and_keeps_order() {
    // Writers: new orders (2 events each), and more events on earlier
    // orders, so aggregates' histories span the outage.
    let (mut server, setup, processor, writer) = traffic_on_private_server("outage").await;
    let (test, stream, outbox, table) = setup.into_parts();

    tokio::time::sleep(Duration::from_secs(1)).await;
    // A burst on top, so the server dies with publishes in flight.
    let in_stream = stream.count().await;
    write_orders(&outbox, "burst", 500, 10, 250).await;
    wait_until(
        Duration::from_secs(10),
        "the burst is being published",
        || async { stream.count().await >= in_stream + 1_000 },
    )
    .await;
    server.kill();
    let before = test.count(&table, "status = 1").await;
    assert!(
        test.count(&table, "status = 0").await > 1_000,
        "the burst was drained before the outage"
    );
    let down_at = Instant::now();
    tokio::time::sleep(OUTAGE).await;
    let written_during = test.count(&table, "1=1").await;
    server.restart().await.expect("nats-server restarted");
    println!(
        "server down for {:?}; {before} published before, {} pending at restart",
        down_at.elapsed(),
        test.count(&table, "status = 0").await
    );
    assert!(
        test.count(&table, "status = 0").await > 0,
        "events written during the outage wait for the broker"
    );
    assert_eq!(
        test.count(&table, "attempts <> 0 OR status = 2").await,
        0,
        "an outage spends no attempt"
    );

    tokio::time::sleep(Duration::from_secs(1)).await; // writing goes on
    let rounds = writer.stop().await;
    let total = test.count(&table, "1=1").await;
    assert!(
        total > written_during,
        "events were written after the restart"
    );
    let restarted = Instant::now();
    wait_all_published(&test, &table, total).await;
    println!(
        "{rounds} rounds, {total} events; caught up {:?} after the last write",
        restarted.elapsed()
    );

    let report = processor.shutdown().await.expect("clean stop");
    assert_stream_matches_outbox(&stream, &test, &table).await;
    assert_all_published_cleanly(&test, &table).await;
    assert_eq!(report.dead + report.failed, 0, "{report:?}");
    assert!(report.published >= total as u64, "{report:?}");
    println!("{report:?}");
    stream.delete().await;
}
