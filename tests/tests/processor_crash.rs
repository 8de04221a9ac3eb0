//! A processor process killed with SIGKILL in the middle of a backlog, and
//! another one started: every event reaches the stream exactly once (the
//! dead process's acknowledged-but-unrecorded messages are published again
//! and JetStream's deduplication absorbs them), in per-aggregate order.

mod processor_support;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use outbox_tests::jetstream::nats_url;
use outbox_tests::{Backend, TestDb};
use processor_support::{
    Setup, assert_once_in_order, read_all, row_ids, shared_setup, wait_until, write_orders,
};
use sea_orm::ConnectionTrait;
use uuid::Uuid;

const ORDERS: usize = 2_000;
const EVENTS_PER_ORDER: usize = 10;
const TOTAL: usize = ORDERS * EVENTS_PER_ORDER;
/// Short, so the second process can take over the dead one's batches soon.
const LEASE_MS: u64 = 2_000;

/// A processor child process, killed on drop.
struct ProcessorProcess {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl ProcessorProcess {
    /// Starts the binary on `test`'s isolated schema and waits for `started`.
    async fn start(test: &TestDb, prefix: &str) -> Self {
        let schema: String = test
            .db
            .query_one_raw(sea_orm::Statement::from_string(
                test.db_backend(),
                "SELECT current_schema() AS s",
            ))
            .await
            .expect("current schema")
            .expect("a row")
            .try_get("", "s")
            .expect("schema name");
        let url = std::env::var("OUTBOX_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let mut child = Command::new(env!("CARGO_BIN_EXE_outbox-test-processor"))
            .args(["--database-url", &url, "--schema", &schema])
            .args(["--nats", &nats_url(), "--subject-prefix", prefix])
            .args(["--lease-ms", &LEASE_MS.to_string(), "--batch-size", "500"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start outbox-test-processor");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let line = tokio::task::block_in_place(|| {
            let mut line = String::new();
            stdout.read_line(&mut line).map(|_| line)
        })
        .expect("read the child's output");
        assert_eq!(
            line.trim(),
            "started",
            "the processor process did not start"
        );
        Self { child, stdout }
    }

    /// SIGKILL, as a crash.
    fn kill(&mut self) {
        self.child.kill().expect("kill the processor process");
        self.child.wait().expect("reap it");
    }

    /// Closes its standard input (a graceful stop) and returns its report
    /// line.
    fn stop(mut self) -> String {
        drop(self.child.stdin.take());
        let mut report = String::new();
        tokio::task::block_in_place(|| {
            self.stdout.read_line(&mut report).expect("read the report");
            let status = self.child.wait().expect("wait for the process");
            assert!(status.success(), "the processor process failed: {status}");
        });
        report
    }
}

impl Drop for ProcessorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_processor_process_loses_and_duplicates_nothing() {
    let Setup {
        test,
        stream,
        outbox,
        table,
    } = shared_setup(Backend::Postgres).await;
    let written = write_orders(&outbox, "c", ORDERS, EVENTS_PER_ORDER, 250).await;
    assert_eq!(written, TOTAL);

    // The first process: killed once part of the backlog is in the stream.
    let mut first = ProcessorProcess::start(&test, &stream.prefix).await;
    // Killed while a batch is half published: past a fifth of the backlog,
    // at a count that is not a whole number of (500-message) batches.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let count = stream.count().await as usize;
        if count >= TOTAL / 5 && !count.is_multiple_of(500) {
            break;
        }
        assert!(
            count < TOTAL && Instant::now() < deadline,
            "no moment mid-batch to kill the processor at ({count} of {TOTAL} in the stream)"
        );
    }
    first.kill();
    // A statement the dead process had sent may still finish on the server.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let in_stream_at_kill = stream.count().await as usize;
    assert!(
        in_stream_at_kill < TOTAL,
        "the first process drained everything before it was killed: not a crash mid-backlog"
    );
    let leased = test.count(&table, "lease_token IS NOT NULL").await;
    let pending_at_kill = test.count(&table, "status = 0").await as u64;
    assert!(
        leased > 0,
        "the killed process held no lease: it was not mid-batch"
    );
    // Acknowledged by the broker, not yet recorded: the second process
    // publishes these again, and deduplication must absorb them.
    let stored_ids: HashSet<Uuid> = read_all(&stream)
        .await
        .iter()
        .map(|(_, m)| *m.id.as_uuid())
        .collect();
    let unrecorded = row_ids(&test, &table, "status = 0")
        .await
        .intersection(&stored_ids)
        .count();
    assert!(
        unrecorded > 0,
        "killed mid-batch, yet no message is acknowledged but unrecorded"
    );
    println!(
        "killed with {in_stream_at_kill} of {TOTAL} in the stream, {leased} rows leased, \
         {unrecorded} acknowledged but unrecorded"
    );

    // The second process takes over once the dead one's leases run out.
    let started = Instant::now();
    let second = ProcessorProcess::start(&test, &stream.prefix).await;
    wait_until(
        Duration::from_secs(40),
        "every row is published",
        || async { test.count(&table, "status = 1").await as usize == TOTAL },
    )
    .await;
    let report = second.stop();
    println!(
        "second process drained the rest in {:?}: {}",
        started.elapsed(),
        report.trim()
    );
    let published: u64 = report
        .split_whitespace()
        .find_map(|field| field.strip_prefix("published="))
        .and_then(|n| n.parse().ok())
        .expect("a report line");
    assert_eq!(
        published, pending_at_kill,
        "the second process publishes (or has deduplicated) exactly what was left pending"
    );

    let stored = read_all(&stream).await;
    assert_once_in_order(&stored, &row_ids(&test, &table, "1=1").await);
    assert_eq!(test.count(&table, "lease_token IS NOT NULL").await, 0);
    assert_eq!(test.count(&table, "status <> 1 OR attempts <> 0").await, 0);
    stream.delete().await;
}
