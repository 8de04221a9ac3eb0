//! The outbox on a 3-node JetStream cluster (a stream with 3 replicas: an
//! ack means a quorum of nodes stored the message), with events written
//! through the unit of work and one processor publishing all along, while
//! a node fails: the stream's leader killed (SIGKILL) mid-drain and
//! restarted; a follower killed and restarted; the whole cluster down for
//! 10 s and back; a follower restarted with an empty store, which must
//! catch up. A subscriber with an inbox (`keep_order`) applies every event
//! as an effect row all along. After each: every committed event in the
//! stream exactly once, in per-aggregate order, nothing dead, no attempt
//! spent (leader elections are transient failures), and every event's
//! effect applied once, in its aggregate's order.
//!
//! One exception, the server's: nats-server 2.9 can store a publish retried
//! across a leader change twice (its clustered dedup was not deterministic;
//! nats-server PR #6415 fixed it for later versions). On 2.9 the stream's
//! first copies are checked (every event, in order) and the copies counted;
//! the inbox's effects, once and in order, are what a user relies on there.

mod processor_support;

use std::time::{Duration, Instant};

use async_nats::jetstream::stream::StorageType;
use processor_support::{
    RoundWriter, assert_all_published_cleanly, assert_first_copies_in_order,
    assert_stream_matches_outbox, cluster_setup, read_all, row_ids, spawn_outage_processor,
    wait_all_published, wait_until, write_orders,
};
use txoutbox_nats::StreamSpec;
use txoutbox_nats::subscriber::{Backoff, RunningSubscriber, Subscriber};
use txoutbox_sea_orm::{Inbox, Outbox};
use txoutbox_suite::effects;
use txoutbox_suite::nats::NatsCluster;
use txoutbox_suite::orders::{OrderAmended, OrderPlaced};

/// What goes wrong in the middle of the drain.
#[derive(Debug, Clone, Copy)]
enum Fault {
    KillLeader,
    KillFollower,
    WholeClusterDown,
    FollowerLosesItsStore,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_leader_killed_mid_drain_loses_nothing_and_keeps_order() {
    survives(Fault::KillLeader, "cl_leader").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_killed_mid_drain_loses_nothing_and_keeps_order() {
    survives(Fault::KillFollower, "cl_follower").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_cluster_down_for_10_s_loses_nothing_and_keeps_order() {
    survives(Fault::WholeClusterDown, "cl_down").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_back_with_an_empty_store_catches_up() {
    survives(Fault::FollowerLosesItsStore, "cl_empty").await;
}

/// One cluster at a time: three nodes and a steady writer each are what a
/// 2-core machine carries without timing out for reasons of its own.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn survives(fault: Fault, prefix: &str) {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let (mut cluster, setup) = cluster_setup(prefix).await;
    let (test, stream, outbox, table) = setup.into_parts();
    let client = cluster.connect().await.expect("a client of the cluster");
    let server = client.server_info().version.clone();
    let processor = spawn_outage_processor(&outbox, client, &format!("/{prefix}-test"));
    effects::create_table(&test).await;
    let subscriber = spawn_subscriber(&cluster, &outbox, &stream.name).await;
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
    let follower = (leader + 1) % cluster.len();
    let started = Instant::now();
    match fault {
        Fault::KillLeader => bounce(&mut cluster, &[leader], Duration::ZERO, false).await,
        Fault::KillFollower => bounce(&mut cluster, &[follower], Duration::ZERO, false).await,
        Fault::WholeClusterDown => {
            bounce(&mut cluster, &[0, 1, 2], Duration::from_secs(10), false).await;
        }
        Fault::FollowerLosesItsStore => {
            bounce(&mut cluster, &[follower], Duration::ZERO, true).await;
        }
    }
    let before = stream.count().await;
    wait_until(
        Duration::from_secs(60),
        "publishing goes on after the fault",
        || async { stream.count().await > before },
    )
    .await;
    println!(
        "{fault:?}: publishing went on {:?} after the fault began",
        started.elapsed()
    );

    tokio::time::sleep(Duration::from_secs(1)).await; // writing goes on
    let rounds = writer.stop().await;
    let total = test.count(&table, "1=1").await;
    wait_all_published(&test, &table, total).await;
    let report = processor.shutdown().await.expect("clean stop");
    println!("{fault:?}: {rounds} rounds, {total} events; {report:?}");
    let leader_changed = matches!(fault, Fault::KillLeader | Fault::WholeClusterDown);
    if leader_changed && server.starts_with("2.9.") {
        let expected = row_ids(&test, &table, "1=1").await;
        let copies = assert_first_copies_in_order(&read_all(&stream).await, &expected);
        println!("{fault:?}: nats-server {server} stored {copies} publish(es) twice");
    } else {
        assert_stream_matches_outbox(&stream, &test, &table).await;
    }
    assert_all_published_cleanly(&test, &table).await;
    assert_eq!(report.dead + report.failed, 0, "{report:?}");
    let drained = Instant::now();
    wait_until(
        Duration::from_secs(60),
        "the subscriber applied every event",
        || async { test.count("effects", "1=1").await >= total },
    )
    .await;
    println!(
        "{fault:?}: the subscriber applied the last effect {:?} after the outbox drained",
        drained.elapsed()
    );
    subscriber
        .shutdown()
        .await
        .expect("the subscriber stops cleanly");
    effects::assert_each_applied_once_in_order(&test, &table).await;
    if let Fault::FollowerLosesItsStore = fault {
        wait_until(
            Duration::from_secs(60),
            "the emptied follower caught up",
            || async { replicas_current(&stream).await },
        )
        .await;
    }
}

/// A subscriber on the cluster (all three URLs) applying every order event
/// as an effect row through the inbox, in each aggregate's order
/// (`keep_order`); its dead letters go to a replicated file stream.
async fn spawn_subscriber(
    cluster: &NatsCluster,
    outbox: &Outbox,
    stream: &str,
) -> RunningSubscriber {
    let client = cluster.connect().await.expect("a client of the cluster");
    let inbox = Inbox::new(outbox, "effects").expect("an inbox");
    let dead_letters = StreamSpec::new("DLQ_effects", ["dlq.effects"])
        .storage(StorageType::File)
        .replicas(3);
    Subscriber::builder(client, "effects")
        .stream(stream)
        .ack_wait(Duration::from_secs(5))
        .backoff(Backoff::exponential(
            Duration::from_millis(100),
            Duration::from_secs(1),
        ))
        .dead_letter_stream(dead_letters)
        .on(inbox.handler_boxed(|_: OrderPlaced, delivery, uow| {
            Box::pin(async move { effects::apply(uow, &delivery).await })
        }))
        .on(inbox.handler_boxed(|_: OrderAmended, delivery, uow| {
            Box::pin(async move { effects::apply(uow, &delivery).await })
        }))
        .build()
        .await
        .expect("the subscriber")
        .spawn()
}

/// Kills `nodes` (SIGKILL), keeps them down for `down`, optionally empties
/// their stores, and starts them again.
async fn bounce(cluster: &mut NatsCluster, nodes: &[usize], down: Duration, empty_store: bool) {
    for &k in nodes {
        cluster.node_mut(k).kill();
    }
    tokio::time::sleep(down).await;
    for &k in nodes {
        let node = cluster.node_mut(k);
        if empty_store {
            std::fs::remove_dir_all(node.store_dir()).expect("empty the node's store");
        }
        node.restart().await.expect("the node restarted");
    }
}

/// Every replica of the stream is current (caught up with the leader).
async fn replicas_current(stream: &txoutbox_suite::jetstream::TestStream) -> bool {
    let Ok(mut handle) = stream.jetstream.get_stream(&stream.name).await else {
        return false;
    };
    let Ok(info) = handle.info().await else {
        return false;
    };
    info.cluster.as_ref().is_some_and(|cluster| {
        cluster.replicas.len() == 2 && cluster.replicas.iter().all(|r| r.current)
    })
}
