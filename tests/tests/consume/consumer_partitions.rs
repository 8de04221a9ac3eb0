//! Consumers on three processes, each owning a third of the partitions
//! (`SubscriberBuilder::partitions`), while writers publish steadily on
//! partitioned subjects (`OutboxConfig::with_partitions`). One process is
//! SIGKILLed mid-stream (holding much of a burst) and started again
//! before its messages' ack wait ran out, writes going on
//! throughout. Afterwards every event's effect is applied exactly once, in
//! each aggregate's sequence order, each by the process owning the
//! aggregate's partition; the killed process's partitions wait while it is
//! down (nobody else takes them) and move again once it is back.

#[path = "../processor/processor_support/mod.rs"]
mod processor_support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use processor_support::{
    Setup, amend_order, ordered_consumer, shared_setup, spawn_processor, wait_all_published,
    wait_until, write_orders,
};
use txoutbox_core::Partitions;
use txoutbox_sea_orm::{Outbox, OutboxConfig};
use txoutbox_suite::Backend;
use txoutbox_suite::process::ProcessorProcess;

const PARTITIONS: u32 = 6;
/// What each process owns: `Partitions::share(i, 3)` of 6.
const OWNERS: [&str; 3] = ["0,3", "1,4", "2,5"];
/// The process that is killed and started again.
const VICTIM: usize = 1;
const ORDERS: usize = 60;
/// Events of each order in the stream before the consumers start.
const BURST: usize = 10;
/// How long the killed process stays down.
const DOWN: Duration = Duration::from_millis(1500);

fn partitions() -> Partitions {
    Partitions::new(PARTITIONS).expect("partitions")
}

async fn consumer(setup: &Setup, own: &str) -> ProcessorProcess {
    let partitions = PARTITIONS.to_string();
    ordered_consumer(setup, &["--partitions", &partitions, "--own", own]).await
}

/// Effects applied so far by the process owning `own`.
async fn applied_by(setup: &Setup, own: &str) -> i64 {
    setup
        .test
        .count("effects", &format!("process = '{own}'"))
        .await
}

/// Amends the orders round-robin, one or two events each, until `stop`.
fn write_steadily(outbox: Outbox, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut written = 0;
        let mut n = 0;
        while !stop.load(Ordering::Acquire) {
            for _ in 0..4 {
                let times = 1 + n % 2;
                amend_order(&outbox, &format!("p-{}", (n * 7) % ORDERS), times).await;
                written += times;
                n += 1;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        written
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_consumer_processes_apply_each_aggregate_in_order_once_across_a_kill() {
    let started = Instant::now();
    let setup = shared_setup(Backend::Postgres).await;
    let (test, stream, _, table) = setup.parts();
    txoutbox_suite::effects::create_table(test).await;
    let outbox = Outbox::new(
        test.db.clone(),
        OutboxConfig::default()
            .with_subject_prefix(&stream.prefix)
            .expect("prefix")
            .with_partitions(partitions()),
    );
    // A burst in the stream before the consumers start, so that the victim
    // dies holding many messages; then steady writes on top.
    let placed = write_orders(&outbox, "p", ORDERS, BURST, 20).await;
    let processor = spawn_processor(&outbox, stream.jetstream.client(), "/consumer-partitions");
    wait_all_published(test, table, placed as i64).await;
    let mut processes = Vec::new();
    for own in OWNERS {
        processes.push(Some(consumer(&setup, own).await));
    }
    let stop_writing = Arc::new(AtomicBool::new(false));
    let writer = write_steadily(outbox.clone(), Arc::clone(&stop_writing));

    // Mid-stream, with messages in flight: SIGKILL one process.
    wait_until(Duration::from_secs(20), "the victim applies", || async {
        applied_by(&setup, OWNERS[VICTIM]).await >= 30
    })
    .await;
    processes[VICTIM].take().expect("running").kill();
    let killed = Instant::now();
    // A commit the victim sent just before it died may still land.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let at_kill = applied_by(&setup, OWNERS[VICTIM]).await;
    let others_at_kill = test.count("effects", "1=1").await - at_kill;
    // Down for less than the ack wait: what it held comes back to its
    // successor only later, after messages of the same aggregates.
    tokio::time::sleep(DOWN).await;
    let while_down = applied_by(&setup, OWNERS[VICTIM]).await;
    let others_while_down = test.count("effects", "1=1").await - while_down - others_at_kill;
    assert_eq!(
        while_down, at_kill,
        "nobody applies the dead process's partitions"
    );
    assert!(others_while_down > 0, "the other processes go on");

    // Back, with writes still going on: its partitions move again.
    let restart = Instant::now();
    processes[VICTIM] = Some(consumer(&setup, OWNERS[VICTIM]).await);
    wait_until(
        Duration::from_secs(20),
        "the victim's partitions move",
        || async { applied_by(&setup, OWNERS[VICTIM]).await > at_kill },
    )
    .await;
    let (resumed, since_kill) = (restart.elapsed(), killed.elapsed());
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop_writing.store(true, Ordering::Release);
    let amended = writer.await.expect("writer");
    let total = (placed + amended) as i64;
    wait_all_published(test, table, total).await;
    wait_until(
        Duration::from_secs(30),
        "every effect is applied",
        || async { test.count("effects", "1=1").await >= total },
    )
    .await;
    processor.shutdown().await.expect("clean shutdown");

    // Every effect once, in each aggregate's order, by its partition's owner.
    txoutbox_suite::effects::assert_each_applied_once_in_order(test, table).await;
    let mut per_process: HashMap<String, usize> = HashMap::new();
    for row in test.rows("SELECT aggregate_id, process FROM effects").await {
        let aggregate: String = row.try_get("", "aggregate_id").expect("aggregate");
        let process: String = row.try_get("", "process").expect("process");
        let partition = partitions().of("order", &aggregate);
        assert!(
            process.split(',').any(|k| k == partition.to_string()),
            "{aggregate} (partition {partition}) was applied by the process owning {process}"
        );
        *per_process.entry(process).or_default() += 1;
    }
    assert_eq!(
        test.count("effects", "1=1").await,
        total,
        "every effect once"
    );
    println!(
        "{total} events of {ORDERS} aggregates in {PARTITIONS} partitions, applied per process \
         {per_process:?}; killed after {at_kill} effects of {}, it stayed at {while_down} for {DOWN:?} \
         while the others applied {others_while_down}; its partitions moved again {:.2} s after \
         its restart ({:.2} s after the kill); all in {:.1} s",
        OWNERS[VICTIM],
        resumed.as_secs_f64(),
        since_kill.as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
    for process in processes.into_iter().flatten() {
        process.stop();
    }
    let _ = stream
        .jetstream
        .delete_stream(txoutbox_suite::process::dead_letter_stream(&stream.prefix))
        .await;
}
