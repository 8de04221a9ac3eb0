//! What was published stays published once across a database outage longer
//! than the stream's duplicate window (issue 42): two processors drain a
//! backlog; the database crashes (`pg_ctl stop -m immediate`, or SIGKILL for
//! MariaDB) right after the broker acknowledged one processor's first
//! publishes and before it could record them, stays down longer than the
//! stream's duplicate window (4 s here, 2 min by default) and than the
//! lease, and comes back. Each processor kept what it published in memory
//! and records it before anyone claims again: the stream stores every
//! message once although JetStream no longer remembers the first copies'
//! `Nats-Msg-Id`s, nothing is lost, and the processors have caught up
//! within seconds of the return (they probe the database rather than wait
//! on the pool's 30-s acquire timeout).

mod processor_support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream::StorageType};
use processor_support::{
    BuildAndSpawn, assert_all_published_cleanly, assert_stream_matches_outbox, outbox_for,
    read_all, wait_until, write_orders,
};
use txoutbox_core::processor::{DEFAULT_LEASE, HealthThresholds};
use txoutbox_core::publisher::PublishAck;
use txoutbox_core::{OutboxMessage, PublishError, Publisher};
use txoutbox_nats::{JetStreamPublisher, StreamSpec};
use txoutbox_sea_orm::Outbox;
use txoutbox_suite::jetstream::TestStream;
use txoutbox_suite::nats::NatsServer;
use txoutbox_suite::private_server::PrivateServer;
use txoutbox_suite::{Backend, TestDb};

/// The stream's duplicate window: short, so an outage outlasts it.
const WINDOW: Duration = Duration::from_secs(4);
/// How long the database stays down: past the window and the lease.
const DOWN: Duration = Duration::from_secs(6);
/// How soon after the database's return every message is published: the
/// return noticed by the next probe (every 250 ms; a probe may wait its
/// 1-s timeout on a server still recovering), what was kept recorded, a
/// second for the other processor to record its own, the rest of the
/// backlog (up to 400 rows). 1.2-1.3 s on a quiet machine; CI once took
/// 3.17 s under its load. Far below what it guards against: a processor
/// that waits out the pool's 30-s acquire timeout (one that claims again
/// instead of recording fails the count of copies below).
const BACK_WITHIN: Duration = Duration::from_secs(5);

/// One outage at a time: a private database, a private nats-server and a
/// processor are what a 2-core machine carries.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_crash_after_the_ack_publishes_nothing_twice() {
    published_once(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_a_crash_after_the_ack_publishes_nothing_twice() {
    published_once(Backend::MySql).await;
}

/// What the processors' publishers share: a gate every publish waits at
/// until the test opens it (so both processors are running and hold
/// batches), and a crash of the database once, right after the broker
/// acknowledged a run and before the processor hears of it: that processor
/// has published what it cannot record.
struct Hook {
    gate: tokio::sync::Semaphore,
    crash: Box<dyn Fn() + Send + Sync>,
    crashed: AtomicBool,
    crashed_at: Mutex<Option<Instant>>,
}

impl Hook {
    fn acked(&self) {
        if !self.crashed.swap(true, Ordering::AcqRel) {
            tokio::task::block_in_place(|| (self.crash)());
            *self.crashed_at.lock().expect("crash time") = Some(Instant::now());
        }
    }

    fn crashed_at(&self) -> Option<Instant> {
        *self.crashed_at.lock().expect("crash time")
    }
}

/// The JetStream publisher of one processor, through the [`Hook`].
struct CrashAfterAck {
    inner: JetStreamPublisher,
    hook: Arc<Hook>,
    /// Runs waiting at the gate.
    waiting: Arc<AtomicUsize>,
}

impl CrashAfterAck {
    async fn through_gate(&self) {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let permit = self.hook.gate.acquire().await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        permit.expect("the gate is never closed").forget();
    }
}

impl Publisher for CrashAfterAck {
    async fn publish(&self, message: &OutboxMessage) -> Result<PublishAck, PublishError> {
        self.through_gate().await;
        let ack = self.inner.publish(message).await;
        if ack.is_ok() {
            self.hook.acked();
        }
        ack
    }

    async fn publish_run(&self, run: &[&OutboxMessage]) -> Vec<Result<PublishAck, PublishError>> {
        self.through_gate().await;
        let acks = self.inner.publish_run(run).await;
        if acks.iter().any(Result::is_ok) {
            self.hook.acked();
        }
        acks
    }

    async fn check_destination(&self, subjects: &str) -> Result<(), PublishError> {
        self.inner.check_destination(subjects).await
    }

    fn is_available(&self) -> bool {
        self.inner.is_available()
    }

    fn ack_timeout(&self) -> Option<Duration> {
        self.inner.ack_timeout()
    }
}

async fn published_once(backend: Backend) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut server = PrivateServer::start(backend).await;
    let test = TestDb::with_schema_on(backend, &server.url()).await;
    let nats = NatsServer::start().await.expect("a private nats-server");
    let client = nats.connect().await.expect("a client of the nats-server");
    let prefix = "once";
    let jetstream = jetstream::new(client.clone());
    let name = "P_once".to_owned();
    StreamSpec::new(&name, [format!("{prefix}.>")])
        .storage(StorageType::File)
        .duplicate_window(WINDOW)
        .processor_lease(DEFAULT_LEASE)
        .ensure(&jetstream)
        .await
        .expect("a stream with a short duplicate window");
    let stream = TestStream {
        jetstream,
        name,
        prefix: prefix.to_owned(),
    };
    let (outbox, table) = outbox_for(&test, prefix);
    // A backlog of 600 events (300 orders), claimed in batches of 100:
    // when the first run is acknowledged, up to three batches are out.
    let total = write_orders(&outbox, "o", 300, 2, 50).await as i64;

    let hook = Arc::new(Hook {
        gate: tokio::sync::Semaphore::new(0),
        crash: server.crash(),
        crashed: AtomicBool::new(false),
        crashed_at: Mutex::new(None),
    });
    let publisher = |client: async_nats::Client| CrashAfterAck {
        inner: JetStreamPublisher::new(client, "/published-once-test"),
        hook: Arc::clone(&hook),
        waiting: Arc::new(AtomicUsize::new(0)),
    };
    let (first, second) = (
        publisher(client),
        publisher(nats.connect().await.expect("a client of the nats-server")),
    );
    let waiting = [Arc::clone(&first.waiting), Arc::clone(&second.waiting)];
    let processor = outbox.processor(first).batch_size(100).build_and_spawn();
    // Another processor, as another process: its own pool and connection.
    let other = Outbox::new(test.connect_again().await, outbox.config().clone())
        .processor(second)
        .batch_size(100)
        .build_and_spawn();
    let healths = [processor.health(), other.health()];
    wait_until(
        Duration::from_secs(20),
        "both processors hold batches",
        || async {
            waiting
                .iter()
                .all(|waiting| waiting.load(Ordering::Acquire) > 0)
        },
    )
    .await;
    hook.gate
        .add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    wait_until(Duration::from_secs(20), "the database crashed", || async {
        hook.crashed_at().is_some()
    })
    .await;
    let crashed = hook.crashed_at().expect("crashed");
    // While the database is down: the processor holds what it published.
    let mut held = 0;
    while crashed.elapsed() < DOWN {
        let holding = healths
            .iter()
            .map(|health| health.check(&HealthThresholds::default()).unrecorded)
            .sum();
        held = held.max(holding);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let in_stream = stream.count().await;
    server.start_again().await;
    let back = Instant::now();
    println!(
        "{backend:?}: database down {:?}; {in_stream} messages in the stream at its return, \
         {held} held unrecorded by the processors",
        crashed.elapsed()
    );
    assert!(
        in_stream > 0,
        "the processor published before the crash, so the stream holds messages the database \
         has not recorded"
    );

    wait_until(
        Duration::from_secs(30),
        "every row is published",
        || async { test.count(&table, "status = 1").await == total },
    )
    .await;
    let caught_up = back.elapsed();
    let stored = read_all(&stream).await;
    let mut copies: HashMap<_, usize> = HashMap::new();
    for (_, message) in &stored {
        *copies.entry(message.id).or_default() += 1;
    }
    let twice = copies.values().filter(|&&n| n > 1).count();
    println!(
        "{backend:?}: every row published {caught_up:?} after the database's return; \
         {} messages stored, {twice} stored twice",
        stored.len()
    );
    assert_eq!(
        twice, 0,
        "messages stored twice: published before the crash, not recorded, published again \
         after the duplicate window"
    );
    assert!(
        caught_up < BACK_WITHIN,
        "caught up {caught_up:?} after the database's return, not within {BACK_WITHIN:?}"
    );
    assert!(
        held > 0,
        "the processors held what they published and could not record"
    );
    let report = processor.shutdown().await.expect("clean stop");
    let other = other.shutdown().await.expect("clean stop");
    assert_stream_matches_outbox(&stream, &test, &table).await;
    assert_all_published_cleanly(&test, &table).await;
    assert_eq!(
        report.dead + report.failed + other.dead + other.failed,
        0,
        "{report:?} {other:?}"
    );
}
