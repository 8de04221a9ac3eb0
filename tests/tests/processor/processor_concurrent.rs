//! Three processors on one PostgreSQL (and one MariaDB) outbox while
//! writers keep adding events: every event reaches the stream exactly once,
//! each aggregate's in order, and all three processors do a fair part of the
//! work (leases and `SKIP LOCKED` spread it; there is no leader).

mod processor_support;

use std::time::{Duration, Instant};

use processor_support::{
    amend_order, assert_stream_matches_outbox, shut_down_all, spawn_separate_processors,
    spawn_writers, wait_all_published, write_orders,
};
use txoutbox_sea_orm::{Outbox, OutboxConfig};
use txoutbox_suite::jetstream::{TestStream, nats_url};
use txoutbox_suite::{Backend, TestDb};

const PROCESSORS: usize = 3;
const WRITERS: usize = 2;
/// Units of work per writer: each places 10 new orders (2 events each) and
/// amends 5 earlier ones (3 events each).
const ROUNDS: usize = 60;

txoutbox_suite::backend_tests!(three_processors_share_one_outbox:
    three_processors_share_one_outbox_under_load => Postgres,
    three_processors_share_one_outbox_under_load_on_mariadb => MySql,
);

async fn three_processors_share_one_outbox(backend: Backend) {
    let test = TestDb::with_schema(backend).await;
    let client = async_nats::connect(nats_url()).await.expect("nats");
    let stream = TestStream::new(client.clone()).await;
    let config = OutboxConfig::default()
        .with_subject_prefix(&stream.prefix)
        .expect("prefix");
    let table = config.table().as_str().to_owned();
    // The writers' outbox: no processor in its process, so the processors
    // learn of commits as separate processes would (NOTIFY, polling).
    let writer_outbox = Outbox::new(test.db.clone(), config.clone());

    // A backlog to start with, then writers while the processors run.
    let backlog = write_orders(&writer_outbox, "b", 500, 4, 100).await;
    let processors = spawn_separate_processors(
        &test,
        &config,
        PROCESSORS,
        async || async_nats::connect(nats_url()).await.expect("nats"),
        "/concurrency-test",
        |builder| {
            builder
                .batch_size(100)
                .poll_interval(Duration::from_millis(200))
        },
    )
    .await;
    let started = Instant::now();
    let writers = spawn_writers(&writer_outbox, WRITERS, |w, outbox| async move {
        let mut written = 0;
        for round in 0..ROUNDS {
            written += write_orders(&outbox, &format!("w{w}-r{round}"), 10, 2, 10).await;
            if round > 0 {
                for n in 0..5 {
                    amend_order(&outbox, &format!("w{w}-r{}-{n}", round - 1), 3).await;
                    written += 3;
                }
            }
        }
        written
    });
    let mut total = backlog;
    for writer in writers {
        total += writer.await.expect("writer");
    }
    let wrote_for = started.elapsed();
    wait_all_published(&test, &table, total as i64).await;
    let drained_after = started.elapsed();

    let reports = shut_down_all(processors).await;
    println!(
        "{backend:?}: {total} events, written in {wrote_for:?}, all published after {drained_after:?}; \
         published per processor: {:?}",
        reports.iter().map(|r| r.published).collect::<Vec<_>>()
    );
    assert_stream_matches_outbox(&stream, &test, &table).await;
    assert_eq!(
        reports.iter().map(|r| r.published).sum::<u64>(),
        total as u64,
        "no message acknowledged twice (a lease would have been broken): {reports:?}"
    );
    for (i, report) in reports.iter().enumerate() {
        assert!(
            report.published as usize >= total / 6,
            "processor {i} published only {} of {total}: the work is not spread ({reports:?})",
            report.published
        );
        assert_eq!(report.dead + report.failed, 0, "{report:?}");
    }
    assert_eq!(test.count(&table, "lease_token IS NOT NULL").await, 0);
    stream.delete().await;
}
