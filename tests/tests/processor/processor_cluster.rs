//! The outbox on a 3-node JetStream cluster (a stream with 3 replicas):
//! the stream's leader is killed (SIGKILL) in the middle of a drain while
//! events are written, then restarted. Every committed event ends up in
//! the stream exactly once, in per-aggregate order, nothing goes dead, and
//! the leader election spends no attempt (a transient failure).

mod processor_support;

use std::time::{Duration, Instant};

use processor_support::{
    RoundWriter, assert_all_published_cleanly, assert_stream_matches_outbox, cluster_setup,
    spawn_outage_processor, wait_all_published, wait_until, write_orders,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_leader_killed_mid_drain_loses_nothing_and_keeps_order() {
    let (mut cluster, setup) = cluster_setup("cluster").await;
    let (test, stream, outbox, table) = setup.into_parts();
    let client = cluster.connect().await.expect("a client of the cluster");
    let processor = spawn_outage_processor(&outbox, client, "/cluster-test");
    let writer = RoundWriter::spawn(&outbox);

    tokio::time::sleep(Duration::from_secs(1)).await;
    let in_stream = stream.count().await;
    write_orders(&outbox, "burst", 500, 10, 250).await;
    wait_until(
        Duration::from_secs(20),
        "the burst is being published",
        || async { stream.count().await >= in_stream + 1_000 },
    )
    .await;
    let leader = cluster
        .stream_leader(&stream.jetstream, &stream.name)
        .await
        .expect("the stream has a leader");
    cluster.node_mut(leader).kill();
    let killed_at = Instant::now();
    assert!(
        test.count(&table, "status = 0").await > 0,
        "the leader died mid-drain"
    );
    // The two others elect a new leader; publishing goes on meanwhile.
    let before = stream.count().await;
    wait_until(
        Duration::from_secs(30),
        "publishing resumes on the new leader",
        || async { stream.count().await > before },
    )
    .await;
    let resumed_after = killed_at.elapsed();
    cluster
        .node_mut(leader)
        .restart()
        .await
        .expect("the old leader restarted");

    tokio::time::sleep(Duration::from_secs(1)).await; // writing goes on
    let rounds = writer.stop().await;
    let total = test.count(&table, "1=1").await;
    wait_all_published(&test, &table, total).await;
    println!(
        "{rounds} rounds, {total} events; publishing resumed {resumed_after:?} after the leader was killed"
    );
    let report = processor.shutdown().await.expect("clean stop");
    assert_stream_matches_outbox(&stream, &test, &table).await;
    assert_all_published_cleanly(&test, &table).await;
    assert_eq!(report.dead + report.failed, 0, "{report:?}");
    println!("{report:?}");
}
