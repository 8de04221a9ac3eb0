//! A broker outage while events are being written and published: a private
//! nats-server is killed for 10 s, then restarted on the same port and
//! store. Every event ends up in the stream exactly once, in per-aggregate
//! order, nothing goes dead, and the outage spends no attempt. And the
//! outbox is back to steady soon after the broker returns (issue 34): the
//! client connected as the library connects it notices the return at once,
//! and the processor publishes as soon as it does.

mod processor_support;

use std::time::{Duration, Instant};

use processor_support::{
    assert_all_published_cleanly, assert_stream_matches_outbox, drain_all, private_server_setup,
    spawn_processor, traffic_on_private_server, wait_all_published, wait_all_published_within,
    wait_until, write_orders,
};
use txoutbox_nats::NatsConnect;

const OUTAGE: Duration = Duration::from_secs(10);

/// Outages long enough for async-nats's own reconnect pauses (doubling up
/// to 4 s) and the processor's unavailability pauses (doubling up to 5 s)
/// to reach their longest.
const OUTAGES: [Duration; 3] = [
    Duration::from_secs(5),
    Duration::from_secs(6),
    Duration::from_secs(7),
];
/// How soon after the broker's return every row written before it is
/// published: well before either pause above would have ended (each of
/// the three returns would have had to land in the first half of a 4-s
/// reconnect pause).
const BACK_WITHIN: Duration = Duration::from_secs(2);

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_is_back_to_steady_soon_after_the_broker_returns() {
    let (mut server, setup) = private_server_setup("back").await;
    let (test, stream, outbox, table) = setup.into_parts();
    let (test, outbox, table) = (&test, &outbox, table.as_str());
    // Defaults throughout: the client as `NatsConnect` connects it, the
    // processor's own settings.
    let client = NatsConnect::new(server.url())
        .connect()
        .await
        .expect("a client of the private nats-server");
    let processor = spawn_processor(outbox, client, "/back-test");
    write_orders(outbox, "before", 50, 2, 10).await;
    drain_all(test, table).await;

    for (round, outage) in OUTAGES.into_iter().enumerate() {
        // A burst just before the kill, so batches may be in flight.
        write_orders(outbox, &format!("burst{round}"), 200, 2, 50).await;
        server.kill();
        let down = Instant::now();
        let written = write_orders(outbox, &format!("down{round}"), 100, 3, 10).await;
        tokio::time::sleep(outage.saturating_sub(down.elapsed())).await;
        // While the broker is still down: the batches in flight at the kill
        // failed and were released, and nothing is claimed meanwhile (once
        // it is back, the processor claims at once, so leases then are new).
        assert_eq!(
            test.count(table, "status = 0 AND lease_token IS NOT NULL")
                .await,
            0,
            "nothing left leased by a batch that failed when the broker went away"
        );
        assert!(
            test.count(table, "status = 0").await >= written as i64,
            "the rows written during the outage waited for the broker"
        );
        server.restart().await.expect("nats-server restarted");
        let back = Instant::now();
        let total = test.count(table, "1=1").await;
        wait_all_published_within(test, table, total, Duration::from_secs(30)).await;
        let took = back.elapsed();
        println!("outage {round} ({outage:?}): every row published {took:?} after the return");
        assert!(
            took < BACK_WITHIN,
            "outage {round} ({outage:?}): the rows written before the return were published \
             {took:?} after it, not within {BACK_WITHIN:?}"
        );
    }

    let report = processor.shutdown().await.expect("clean stop");
    assert_all_published_cleanly(test, table).await;
    assert_stream_matches_outbox(&stream, test, table).await;
    assert_eq!(report.dead + report.failed, 0, "{report:?}");
    stream.delete().await;
}
