//! A claim that comes back full is followed by the next one at once, not
//! after `poll_interval`: a backlog of several batches, pending before the
//! processor starts (nothing wakes it but its own claims), drains with a
//! 5-s poll interval in well under 5 s, on every backend. So is a claim
//! that stopped at its limit and came back short (a row another
//! transaction holds cuts a run), on PostgreSQL and MariaDB (SQLite has one
//! writer: no row is held while a claim runs). On MariaDB the processor's
//! completions once waited for that row while it was held: the optimizer
//! read a small table's pending rows through the status index, and InnoDB
//! locks what it reads.

mod processor_support;

use std::time::{Duration, Instant};

use processor_support::{
    assert_all_published_cleanly, assert_stream_matches_outbox, shared_setup, spawn_tuned,
    wait_all_published_within, wait_for_rows, write_orders,
};
use sea_orm::{ConnectionTrait, Statement, TransactionTrait};
use txoutbox_suite::Backend;

const BATCH: u32 = 100;
const POLL: Duration = Duration::from_secs(5);

async fn a_backlog_of_several_batches_drains_without_waiting_for_the_poll(backend: Backend) {
    let (test, stream, outbox, table) = shared_setup(backend).await.into_parts();
    // 3.5 batches, one message per aggregate, written before the start.
    let written = write_orders(&outbox, "backlog", 350, 1, 50).await as i64;
    let started = Instant::now();
    let processor = spawn_tuned(
        &outbox,
        stream.jetstream.client(),
        "/backlog-test",
        |builder| builder.batch_size(BATCH).poll_interval(POLL),
    );
    wait_all_published_within(&test, &table, written, POLL).await;
    let drained = started.elapsed();
    let report = processor.shutdown().await.expect("clean stop");
    println!(
        "{backend:?}: {written} rows in {} batches of up to {BATCH} drained in {drained:?} (poll interval {POLL:?})",
        report.batches
    );
    assert!(
        report.batches >= 4,
        "the backlog took several claims: {report:?}"
    );
    assert!(
        drained < POLL / 2,
        "{written} rows drained in {drained:?}: a full claim waited for the poll interval"
    );
    assert_all_published_cleanly(&test, &table).await;
    assert_stream_matches_outbox(&stream, &test, &table).await;
    stream.delete().await;
}

txoutbox_suite::each_backend!(empty: a_backlog_of_several_batches_drains_without_waiting_for_the_poll);

/// The first claim takes `short-0`'s run, whose second message another
/// transaction holds: it comes back two messages short of its limit, and
/// says more may be waiting. A processor that took a short claim for "no
/// more" waited its poll with the rest of the backlog untouched.
async fn a_short_claim_at_its_limit_is_followed_at_once(backend: Backend) {
    let (test, stream, outbox, table) = shared_setup(backend).await.into_parts();
    // 1.5 batches, three messages per aggregate, written before the start.
    let written = write_orders(&outbox, "short", 50, 3, 25).await as i64;
    // Held by primary key: a locking read through another index would lock
    // every row it reads on MariaDB.
    let id: uuid::Uuid = test
        .row(&format!(
            "SELECT id FROM {table} WHERE aggregate_id = 'short-0' AND sequence = 2"
        ))
        .await
        .try_get("", "id")
        .expect("the id");
    let id = match backend {
        Backend::Postgres => format!("'{id}'::uuid"),
        Backend::MySql | Backend::Sqlite => format!("X'{}'", id.simple()),
    };
    let holder = test.db.begin().await.expect("begin");
    holder
        .query_all_raw(Statement::from_string(
            test.db_backend(),
            format!("SELECT id FROM {table} WHERE id = {id} FOR UPDATE"),
        ))
        .await
        .expect("hold a row");
    let started = Instant::now();
    let processor = spawn_tuned(
        &outbox,
        stream.jetstream.client(),
        "/short-claim-test",
        |builder| builder.batch_size(BATCH).poll_interval(POLL),
    );
    // Everything but the held row and the one behind it.
    wait_for_rows(
        &test,
        &table,
        "status = 1",
        written - 2,
        POLL,
        "all but short-0's last two are published",
    )
    .await;
    let drained = started.elapsed();
    println!(
        "{backend:?}: {} rows drained in {drained:?} past a held row",
        written - 2
    );
    assert!(
        drained < POLL / 2,
        "drained in {drained:?}: a claim short of its limit waited for the poll interval"
    );
    holder.rollback().await.expect("let the row go");
    wait_all_published_within(&test, &table, written, POLL * 2).await;
    processor.shutdown().await.expect("clean stop");
    assert_all_published_cleanly(&test, &table).await;
    assert_stream_matches_outbox(&stream, &test, &table).await;
    stream.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_claim_at_its_limit_is_followed_at_once_on_postgres() {
    a_short_claim_at_its_limit_is_followed_at_once(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_claim_at_its_limit_is_followed_at_once_on_mariadb() {
    a_short_claim_at_its_limit_is_followed_at_once(Backend::MySql).await;
}
