//! Fencing a batch by its own messages, and commits leased at commit whose
//! writer is slow, cancelled or outlives the processor:
//! - a batch that loses some of its messages to another processor stops
//!   publishing (its renewal counts the messages it still holds, not "any
//!   row under the token");
//! - a cancelled commit's messages are published within the lease while
//!   other writes go on;
//! - a processor's shutdown does not wait for a writer stuck on a row lock
//!   past `shutdown_timeout`, and that writer releases what it committed;
//! - a broker outage does not make the processor wait for such a writer.

mod processor_support;

use std::time::{Duration, Instant};

use processor_support::{
    BuildAndSpawn, Builder, Gated, RoundWriter, Setup, amend_order, assert_all_published_cleanly,
    assert_stream_matches_outbox, begin_with_order, private_server_setup, save_new_order,
    shared_setup, stop_writing_and_check, wait_all_published, wait_for_rows, wait_until,
};
use sea_orm::{ConnectionTrait, DatabaseTransaction, Statement, TransactionTrait};
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::Outbox;
use txoutbox_suite::{Backend, TestDb};

/// A lease short enough for the tests, with an ack timeout a fifth of it.
const LEASE: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(500);

fn publisher(client: async_nats::Client, source: &str) -> JetStreamPublisher {
    JetStreamPublisher::new(client, source).with_ack_timeout(LEASE / 5)
}

/// `now() + 1 hour` in the backend's SQL, as the outbox stores lease ends.
fn an_hour_from_now(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "now() + interval '1 hour'",
        Backend::MySql => "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR",
        Backend::Sqlite => "strftime('%Y-%m-%d %H:%M:%f', 'now', '+1 hour')",
    }
}

async fn execute(db: &impl ConnectionTrait, sql: String) -> u64 {
    db.execute_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .expect("statement")
        .rows_affected()
}

async fn a_batch_stops_when_part_of_it_is_taken_over(backend: Backend) {
    let (test, stream, outbox, table) = shared_setup(backend).await.into_parts();
    // Order "a" has two events, order "b" one; all three are claimed in one
    // batch once the processor starts.
    save_new_order(&outbox, "a", 100).await;
    amend_order(&outbox, "a", 1).await;
    save_new_order(&outbox, "b", 100).await;
    let gated = Gated::closed(JetStreamPublisher::new(
        stream.jetstream.client(),
        "/lease-fencing",
    ));
    let processor = outbox
        .processor(gated.clone())
        .lease(LEASE)
        .batches_in_flight(1)
        .build_and_spawn();
    // a#1 and b#1 are being published (held at the gate), a#2 waits behind
    // a#1 in the same batch.
    gated.wait_for_waiting(2).await;
    assert_eq!(test.count(&table, "lease_token IS NOT NULL").await, 3);

    // Another processor takes order "a" over (as after the lease ran out
    // while this one was paused): new token, a lease of its own.
    let taken = execute(
        &test.db,
        format!(
            "UPDATE {table} SET lease_token = id, lease_expires_at = {until} \
             WHERE aggregate_id = 'a'",
            until = an_hour_from_now(backend)
        ),
    )
    .await;
    assert_eq!(taken, 2);
    // The batch renews every third of the lease: after two thirds, one
    // renewal has found a#1 and a#2 gone while b#1 is still held.
    tokio::time::sleep(LEASE * 2 / 3 + Duration::from_millis(200)).await;

    gated.open();
    // The batch ends (b#1 completed: settlement comes after every publish).
    wait_for_rows(
        &test,
        &table,
        "aggregate_id = 'b' AND status = 1",
        1,
        Duration::from_secs(10),
        "b#1 is completed",
    )
    .await;
    let published: Vec<(String, u64)> = stream
        .messages()
        .await
        .into_iter()
        .map(|(_, m)| (m.aggregate_id, m.sequence))
        .collect();
    assert!(
        !published.contains(&("a".to_owned(), 2)),
        "a#2 was published after its lease passed to another processor: {published:?}"
    );
    assert_eq!(
        test.count(
            &table,
            "aggregate_id = 'a' AND status = 0 AND lease_token = id"
        )
        .await,
        2,
        "the taken-over messages belong to their new holder, untouched"
    );
    processor.shutdown().await.expect("clean shutdown");
}

txoutbox_suite::each_backend!(empty: a_batch_stops_when_part_of_it_is_taken_over);

/// A transaction on its own connection holding order `id`'s row lock, and
/// that connection's backend pid (PostgreSQL).
async fn lock_order(test: &TestDb, id: &str) -> (DatabaseTransaction, i32) {
    let db = test.connect_again().await;
    let txn = db.begin().await.expect("begin");
    let row = txn
        .query_one_raw(Statement::from_string(
            test.db_backend(),
            format!("SELECT pg_backend_pid() AS pid FROM orders WHERE id = '{id}' FOR UPDATE"),
        ))
        .await
        .expect("lock")
        .expect("the order exists");
    let pid: i32 = row.try_get("", "pid").expect("pid");
    (txn, pid)
}

/// Waits until a statement waits for the lock `pid` holds.
async fn wait_blocked_by(test: &TestDb, pid: i32) {
    wait_until(
        Duration::from_secs(10),
        "the writer waits for the row lock",
        || async {
            test.row(&format!(
                "SELECT count(*) AS n FROM pg_stat_activity \
                 WHERE {pid} = ANY(pg_blocking_pids(pid))"
            ))
            .await
            .try_get::<i64>("", "n")
            .expect("n")
                > 0
        },
    )
    .await;
}

/// A writer amending order `id` whose commit (leased to the processor)
/// waits for the row lock that the returned transaction holds: commit or
/// drop that to let it go on.
async fn stuck_writer(
    test: &TestDb,
    outbox: &Outbox,
    id: &str,
) -> (
    DatabaseTransaction,
    tokio::task::JoinHandle<Result<Vec<txoutbox_core::MessageId>, txoutbox_sea_orm::OutboxError>>,
) {
    let (blocker, pid) = lock_order(test, id).await;
    let commit = tokio::spawn(amendment(outbox, id).await.commit());
    wait_blocked_by(test, pid).await;
    (blocker, commit)
}

/// A unit of work that amends order `id` once, ready to commit.
async fn amendment(outbox: &Outbox, id: &str) -> txoutbox_sea_orm::UnitOfWork {
    let (mut uow, mut order) = begin_with_order(outbox, id).await;
    order.amend(500).expect("record");
    uow.save(&mut order).await.expect("save");
    uow
}

/// Spawns a processor on `setup` with the tests' lease (publishing through
/// `client` as `source`, with the settings `tune` adds), saves order `id`
/// and waits until its first event is published: the order a stuck writer
/// then amends.
async fn processor_with_order(
    setup: &Setup,
    client: async_nats::Client,
    source: &str,
    id: &str,
    tune: impl FnOnce(Builder) -> Builder,
) -> txoutbox_core::ProcessorHandle {
    let (test, _, outbox, table) = setup.parts();
    let processor =
        tune(outbox.processor(publisher(client, source)).lease(LEASE)).build_and_spawn();
    save_new_order(outbox, id, 100).await;
    wait_all_published(test, table, 1).await;
    processor
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_commit_is_published_within_the_lease_while_writes_go_on() {
    let setup = shared_setup(Backend::Postgres).await;
    let (test, stream, outbox, table) = setup.parts();
    let client = stream.jetstream.client();
    let processor = processor_with_order(&setup, client, "/cancelled-commit", "x", |b| {
        b.poll_interval(POLL)
    })
    .await;
    let writer = RoundWriter::spawn(outbox);

    // The commit waits for the order's row lock, leased to the processor,
    // and is cancelled (a handler's timeout); the server still runs it.
    let (blocker, commit) = stuck_writer(test, outbox, "x").await;
    commit.abort();
    assert!(commit.await.expect_err("aborted").is_cancelled());
    blocker.commit().await.expect("unlock");
    let committed_at = Instant::now();
    wait_for_rows(
        test,
        table,
        "aggregate_id = 'x' AND sequence = 2",
        1,
        Duration::from_secs(10),
        "the cancelled commit's event is committed",
    )
    .await;

    // Published within the lease and a claim, whatever traffic goes on.
    let bound = LEASE + POLL * 2 + Duration::from_secs(2);
    wait_for_rows(
        test,
        table,
        "aggregate_id = 'x' AND sequence = 2 AND status = 1",
        1,
        bound,
        "x#2 is published",
    )
    .await;
    let took = committed_at.elapsed();
    println!("x#2 published {took:?} after its commit");

    stop_writing_and_check(&setup, writer, processor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_for_a_stuck_writer_which_releases_its_rows() {
    let setup = shared_setup(Backend::Postgres).await;
    let (test, stream, outbox, table) = setup.parts();
    let processor = processor_with_order(
        &setup,
        stream.jetstream.client(),
        "/stuck-writer",
        "y",
        |b| b.shutdown_timeout(Duration::from_millis(500)),
    )
    .await;

    // A writer inside the processor's lease offer, waiting for a row lock.
    let (blocker, commit) = stuck_writer(test, outbox, "y").await;

    let stopping = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), processor.shutdown())
        .await
        .expect("shutdown is bounded by shutdown_timeout, not by the writer")
        .expect("clean shutdown");
    println!("shut down in {:?}", stopping.elapsed());

    // The writer commits after the processor stopped: its hand-over is
    // refused and it releases the row itself, long before the lease ends.
    blocker.commit().await.expect("unlock");
    commit.await.expect("task").expect("the commit succeeds");
    assert_eq!(
        test.count(
            table,
            "aggregate_id = 'y' AND sequence = 2 AND status = 0 AND lease_token IS NULL"
        )
        .await,
        1,
        "released by its writer, claimable at once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_does_not_wait_for_a_stuck_writer() {
    let (mut server, setup) = private_server_setup("stuck-outage").await;
    let (test, stream, outbox, table) = setup.parts();
    let processor = processor_with_order(
        &setup,
        server
            .connect()
            .await
            .expect("a client of the private nats-server"),
        "/stuck-outage",
        "z",
        |b| b.unavailable_backoff(Duration::from_millis(50), Duration::from_millis(500)),
    )
    .await;

    let (blocker, commit) = stuck_writer(test, outbox, "z").await;

    // The broker goes away while the writer is inside the lease offer; the
    // processor notices within a poll interval and pauses.
    server.kill();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    server.restart().await.expect("nats-server restarted");

    // Other aggregates publish again while the writer still waits.
    save_new_order(outbox, "w", 100).await;
    wait_for_rows(
        test,
        table,
        "aggregate_id = 'w' AND status = 1",
        1,
        Duration::from_secs(10),
        "w is published while z's writer is stuck",
    )
    .await;

    blocker.commit().await.expect("unlock");
    commit.await.expect("task").expect("the commit succeeds");
    wait_all_published(test, table, 3).await;
    assert_all_published_cleanly(test, table).await;
    assert_stream_matches_outbox(stream, test, table).await;
    processor.shutdown().await.expect("clean shutdown");
}
