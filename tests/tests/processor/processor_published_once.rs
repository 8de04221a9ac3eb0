//! What was published stays published once across a database outage longer
//! than the stream's duplicate window (issue 42): the database crashes
//! (`pg_ctl stop -m immediate`, or SIGKILL for MariaDB) right after the
//! broker acknowledged the processor's first publishes and before the
//! processor could record them, stays down longer than the stream's
//! duplicate window (4 s here, 2 min by default) and than the lease, and
//! comes back. The processor kept what it published in memory and records
//! it before it claims again: the stream stores every message once although
//! JetStream no longer remembers the first copies' `Nats-Msg-Id`s, nothing
//! is lost, and the processor has caught up within seconds of the return
//! (it pings the database rather than waiting on the pool's 30-s acquire
//! timeout).

mod processor_support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
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
use txoutbox_suite::jetstream::TestStream;
use txoutbox_suite::nats::NatsServer;
use txoutbox_suite::private_mariadb::PrivateMariaDb;
use txoutbox_suite::private_postgres::{PrivatePostgres, Shutdown};
use txoutbox_suite::{Backend, TestDb};

/// The stream's duplicate window: short, so an outage outlasts it.
const WINDOW: Duration = Duration::from_secs(4);
/// How long the database stays down: past the window and the lease.
const DOWN: Duration = Duration::from_secs(6);
/// How soon after the database's return every message is published.
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

/// A private database server of either kind.
enum Server {
    Postgres(Arc<PrivatePostgres>),
    MariaDb(PrivateMariaDb),
}

impl Server {
    async fn start(backend: Backend) -> Self {
        match backend {
            Backend::Postgres => Server::Postgres(Arc::new(PrivatePostgres::start())),
            Backend::MySql => Server::MariaDb(PrivateMariaDb::start().await),
            Backend::Sqlite => unreachable!("SQLite has no server"),
        }
    }

    fn url(&self) -> String {
        match self {
            Server::Postgres(pg) => pg.url(),
            Server::MariaDb(maria) => maria.url(),
        }
    }

    /// What crashes the server, callable from inside a publisher.
    fn crash(&self) -> Box<dyn Fn() + Send + Sync> {
        match self {
            Server::Postgres(pg) => {
                let pg = Arc::clone(pg);
                Box::new(move || pg.stop(Shutdown::Immediate))
            }
            Server::MariaDb(maria) => {
                let command = Mutex::new(maria.crash_command());
                Box::new(move || {
                    let status = command.lock().expect("the kill command").status();
                    assert!(status.is_ok_and(|s| s.success()), "mariadbd killed");
                })
            }
        }
    }

    async fn start_again(&mut self) {
        match self {
            Server::Postgres(pg) => tokio::task::block_in_place(|| pg.start_again()),
            Server::MariaDb(maria) => maria.start_again().await,
        }
    }
}

/// The JetStream publisher, crashing the database once right after the
/// broker acknowledged a run and before the processor hears of it: the
/// processor has published what it cannot record.
struct CrashAfterAck {
    inner: JetStreamPublisher,
    crash: Box<dyn Fn() + Send + Sync>,
    armed: AtomicBool,
    crashed_at: Arc<Mutex<Option<Instant>>>,
}

impl CrashAfterAck {
    fn acked(&self) {
        if self.armed.swap(false, Ordering::AcqRel) {
            tokio::task::block_in_place(|| (self.crash)());
            *self.crashed_at.lock().expect("crash time") = Some(Instant::now());
        }
    }
}

impl Publisher for CrashAfterAck {
    async fn publish(&self, message: &OutboxMessage) -> Result<PublishAck, PublishError> {
        let ack = self.inner.publish(message).await;
        if ack.is_ok() {
            self.acked();
        }
        ack
    }

    async fn publish_run(&self, run: &[&OutboxMessage]) -> Vec<Result<PublishAck, PublishError>> {
        let acks = self.inner.publish_run(run).await;
        if acks.iter().any(Result::is_ok) {
            self.acked();
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
    let mut server = Server::start(backend).await;
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

    let crashed_at = Arc::new(Mutex::new(None));
    let publisher = CrashAfterAck {
        inner: JetStreamPublisher::new(client, "/published-once-test"),
        crash: server.crash(),
        armed: AtomicBool::new(true),
        crashed_at: Arc::clone(&crashed_at),
    };
    let processor = outbox
        .processor(publisher)
        .batch_size(100)
        .build_and_spawn();
    let health = processor.health();
    let crashed = || *crashed_at.lock().expect("crash time");
    wait_until(Duration::from_secs(20), "the database crashed", || async {
        crashed().is_some()
    })
    .await;
    let crashed = crashed().expect("crashed");
    // While the database is down: the processor holds what it published.
    let mut held = 0;
    while crashed.elapsed() < DOWN {
        held = held.max(health.check(&HealthThresholds::default()).unrecorded);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let in_stream = stream.count().await;
    server.start_again().await;
    let back = Instant::now();
    println!(
        "{backend:?}: database down {:?}; {in_stream} messages in the stream at its return, \
         {held} held unrecorded by the processor",
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
        "the processor held what it published and could not record"
    );
    let report = processor.shutdown().await.expect("clean stop");
    assert_stream_matches_outbox(&stream, &test, &table).await;
    assert_all_published_cleanly(&test, &table).await;
    assert_eq!(report.dead + report.failed, 0, "{report:?}");
}
