//! Shared by the processor acceptance tests (`processor_*.rs`): writing
//! orders through the unit of work, reading a whole stream back, and the
//! one check they all make: every outbox row is in the stream exactly once,
//! and each aggregate's messages are stored in sequence order.

#![allow(dead_code)] // each test binary uses its own subset

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::pull, stream::StorageType};
use futures::StreamExt;
use txoutbox_core::processor::ProcessorReport;
use txoutbox_core::publisher::PublishAck;
use txoutbox_core::{
    OutboxMessage, OutboxStore, ProcessorHandle, PublishError, Publisher, RetryPolicy,
};
use txoutbox_nats::{JetStreamPublisher, StreamSpec};
use txoutbox_sea_orm::{Outbox, OutboxConfig, UnitOfWork};
use txoutbox_suite::jetstream::{TestStream, decode_stored, nats_url};
use txoutbox_suite::nats::{NatsCluster, NatsServer};
use txoutbox_suite::orders::Order;
use txoutbox_suite::{Backend, TestDb};
use uuid::Uuid;

/// An event whose payload is as large as its `data`: over a
/// [`poison_server`]'s `max_payload` it is a poison message, rejected on
/// every attempt.
#[derive(Debug, serde::Serialize, serde::Deserialize, txoutbox_core::IntegrationEvent)]
#[event(name = "test.order.attachment")]
pub(crate) struct AttachmentAdded {
    pub(crate) data: String,
}

impl AttachmentAdded {
    /// An attachment of 8 KiB: twice a [`poison_server`]'s `max_payload`.
    pub(crate) fn poison() -> Self {
        Self {
            data: "x".repeat(8 * 1024),
        }
    }
}

/// A private nats-server whose `max_payload` is 4,096 bytes.
pub(crate) async fn poison_server() -> NatsServer {
    NatsServer::builder()
        .config("max_payload: 4096")
        .start()
        .await
        .expect("a private nats-server")
}

/// The machine's JetStream publisher behind a gate: each publish waits for a
/// permit, so a test can hold messages in flight.
#[derive(Clone)]
pub(crate) struct Gated {
    inner: Arc<JetStreamPublisher>,
    gate: Arc<tokio::sync::Semaphore>,
    /// Publishes waiting at the gate.
    pub(crate) waiting: Arc<AtomicUsize>,
}

impl Gated {
    /// A publisher whose publishes all wait until [`open`](Self::open).
    pub(crate) fn closed(inner: JetStreamPublisher) -> Self {
        Self {
            inner: Arc::new(inner),
            gate: Arc::new(tokio::sync::Semaphore::new(0)),
            waiting: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Lets every publish through, now and later.
    pub(crate) fn open(&self) {
        self.gate
            .add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }

    /// Waits (up to 10 s) until `count` publishes wait at the gate.
    pub(crate) async fn wait_for_waiting(&self, count: usize) {
        wait_until(
            Duration::from_secs(10),
            "publishes wait at the gate",
            || {
                let waiting = self.waiting.load(Ordering::Acquire);
                async move { waiting >= count }
            },
        )
        .await;
    }
}

impl Publisher for Gated {
    async fn publish(&self, message: &OutboxMessage) -> Result<PublishAck, PublishError> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let permit = self.gate.acquire().await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        permit.expect("the gate is never closed").forget();
        self.inner.publish(message).await
    }
}

/// A test's database, stream and outbox (publishing under the stream's
/// prefix), and the name of the outbox table.
pub(crate) struct Setup {
    pub(crate) test: TestDb,
    pub(crate) stream: TestStream,
    pub(crate) outbox: Outbox,
    pub(crate) table: String,
}

impl Setup {
    /// The JetStream stream the setup's outbox publishes to.
    pub(crate) async fn jetstream_stream(&self) -> jetstream::stream::Stream {
        self.stream
            .jetstream
            .get_stream(&self.stream.name)
            .await
            .expect("the stream")
    }

    /// `test` and `stream` with an outbox on `test`'s database publishing
    /// under the stream's prefix.
    fn new(test: TestDb, stream: TestStream) -> Self {
        let (outbox, table) = outbox_for(&test, &stream.prefix);
        Self {
            test,
            stream,
            outbox,
            table,
        }
    }

    /// The parts, to name them in a test:
    /// `let (test, stream, outbox, table) = shared_setup(backend).await.into_parts();`.
    pub(crate) fn into_parts(self) -> (TestDb, TestStream, Outbox, String) {
        (self.test, self.stream, self.outbox, self.table)
    }

    /// The parts, borrowed, for a test that hands the whole setup on too.
    pub(crate) fn parts(&self) -> (&TestDb, &TestStream, &Outbox, &str) {
        (&self.test, &self.stream, &self.outbox, &self.table)
    }
}

/// An outbox on `test`'s database publishing under `prefix`, and the name of
/// its table.
pub(crate) fn outbox_for(test: &TestDb, prefix: &str) -> (Outbox, String) {
    let outbox = Outbox::new(
        test.db.clone(),
        OutboxConfig::default()
            .with_subject_prefix(prefix)
            .expect("prefix"),
    );
    let table = outbox.config().table().as_str().to_owned();
    (outbox, table)
}

/// A fresh schema on `backend`, a fresh memory stream on the machine's
/// nats-server, and an outbox for them (the stream's
/// `jetstream.client()` is the client for the processor's publisher).
pub(crate) async fn shared_setup(backend: Backend) -> Setup {
    let test = TestDb::with_schema(backend).await;
    let client = async_nats::connect(nats_url()).await.expect("nats");
    Setup::new(test, TestStream::new(client).await)
}

/// A private nats-server (for the test to kill, pause or restart), and a
/// [`private_setup`] on PostgreSQL for it.
pub(crate) async fn private_server_setup(prefix: &str) -> (NatsServer, Setup) {
    let server = NatsServer::start().await.expect("a private nats-server");
    let setup = private_setup(&server, Backend::Postgres, prefix).await;
    (server, setup)
}

/// A private 3-node JetStream cluster, a fresh PostgreSQL schema, a file
/// stream capturing `<prefix>.>` with 3 replicas (an ack means a quorum of
/// the nodes stored the message), and an outbox for them.
pub(crate) async fn cluster_setup(prefix: &str) -> (NatsCluster, Setup) {
    let cluster = NatsCluster::start(3)
        .await
        .expect("a private 3-node cluster");
    setup_on_cluster(cluster, prefix).await
}

/// [`cluster_setup`] on a cluster of nats-server 2.14 nodes
/// (`current_nats_server`).
pub(crate) async fn current_cluster_setup(prefix: &str) -> (NatsCluster, Setup) {
    let binary = txoutbox_suite::nats::current_nats_server();
    let cluster = NatsCluster::start_with_binary(3, binary.display().to_string())
        .await
        .expect("a private 3-node cluster of nats-server 2.14");
    setup_on_cluster(cluster, prefix).await
}

/// A replicated file stream on `cluster`, a fresh PostgreSQL schema and an
/// outbox for them (see [`cluster_setup`]).
async fn setup_on_cluster(cluster: NatsCluster, prefix: &str) -> (NatsCluster, Setup) {
    let jetstream = jetstream::new(cluster.connect().await.expect("a client of the cluster"));
    let name = format!("P_{prefix}");
    StreamSpec::new(&name, [format!("{prefix}.>")])
        .storage(StorageType::File)
        .replicas(3)
        .processor_lease(Duration::from_secs(30))
        .ensure(&jetstream)
        .await
        .expect("create the replicated stream");
    let stream = TestStream {
        jetstream,
        name,
        prefix: prefix.to_owned(),
    };
    let test = TestDb::with_schema(Backend::Postgres).await;
    (cluster, Setup::new(test, stream))
}

/// Writes going on across broker trouble: a [`private_server_setup`] (the
/// test kills or pauses its server), a processor made for outages
/// ([`spawn_outage_processor`], source `/<prefix>-test`) and a
/// [`RoundWriter`].
pub(crate) async fn traffic_on_private_server(
    prefix: &str,
) -> (NatsServer, Setup, ProcessorHandle, RoundWriter) {
    let (server, setup) = private_server_setup(prefix).await;
    let source = format!("/{prefix}-test");
    let processor = spawn_outage_processor(
        &setup.outbox,
        server
            .connect()
            .await
            .expect("a client of the private nats-server"),
        &source,
    );
    let writer = RoundWriter::spawn(&setup.outbox);
    (server, setup, processor, writer)
}

/// A fresh schema on `backend`, a file stream capturing `<prefix>.>` on the
/// private `server`, and an outbox for them.
pub(crate) async fn private_setup(server: &NatsServer, backend: Backend, prefix: &str) -> Setup {
    let test = TestDb::with_schema(backend).await;
    Setup::new(
        test,
        file_stream(
            server
                .connect()
                .await
                .expect("a client of the private nats-server"),
            prefix,
        )
        .await,
    )
}

/// Builds a processor from the settings a test chose and spawns it; the
/// tests' settings are all valid, so a refusal is the test's bug.
pub(crate) trait BuildAndSpawn {
    /// `build()`, then `spawn()`.
    fn build_and_spawn(self) -> ProcessorHandle;
}

impl<S: OutboxStore + 'static, P: Publisher> BuildAndSpawn
    for txoutbox_core::processor::ProcessorBuilder<S, P>
{
    fn build_and_spawn(self) -> ProcessorHandle {
        self.build().expect("valid settings").spawn()
    }
}

/// Spawns a processor with default settings publishing through `client`
/// with CloudEvents source `source`.
pub(crate) fn spawn_processor(
    outbox: &Outbox,
    client: async_nats::Client,
    source: &str,
) -> ProcessorHandle {
    spawn_tuned(outbox, client, source, |builder| builder)
}

/// Spawns a processor made for broker trouble: batches of 100 and a short
/// backoff (50 ms up to 500 ms) while the broker is unavailable.
pub(crate) fn spawn_outage_processor(
    outbox: &Outbox,
    client: async_nats::Client,
    source: &str,
) -> ProcessorHandle {
    spawn_tuned(outbox, client, source, |builder| {
        builder
            .batch_size(100)
            .unavailable_backoff(Duration::from_millis(50), Duration::from_millis(500))
    })
}

/// Spawns a processor on `outbox` publishing through `client` with
/// CloudEvents source `source`, with the settings `tune` makes (the test's
/// knobs: batch size, poll interval, lease, ...).
pub(crate) fn spawn_tuned(
    outbox: &Outbox,
    client: async_nats::Client,
    source: &str,
    tune: impl FnOnce(Builder) -> Builder,
) -> ProcessorHandle {
    tune(outbox.processor(JetStreamPublisher::new(client, source))).build_and_spawn()
}

/// `count` processors on the outbox table of `config` in `test`'s database,
/// each with its own pool and its own NATS connection (from `connect`),
/// like separate processes, publishing as `source` with the settings `tune`
/// makes.
pub(crate) async fn spawn_separate_processors(
    test: &TestDb,
    config: &OutboxConfig,
    count: usize,
    connect: impl AsyncFn() -> async_nats::Client,
    source: &str,
    tune: impl Fn(Builder) -> Builder,
) -> Vec<ProcessorHandle> {
    let mut processors = Vec::with_capacity(count);
    for _ in 0..count {
        let own = Outbox::new(test.connect_again().await, config.clone());
        processors.push(spawn_tuned(&own, connect().await, source, &tune));
    }
    processors
}

/// Spawns `count` writer tasks, each running `write` with its number and a
/// handle on `outbox` of its own.
pub(crate) fn spawn_writers<T, Fut>(
    outbox: &Outbox,
    count: usize,
    write: impl Fn(usize, Outbox) -> Fut,
) -> Vec<tokio::task::JoinHandle<T>>
where
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    (0..count)
        .map(|w| tokio::spawn(write(w, outbox.clone())))
        .collect()
}

/// Shuts each of `processors` down, in turn; their reports.
pub(crate) async fn shut_down_all(processors: Vec<ProcessorHandle>) -> Vec<ProcessorReport> {
    let mut reports = Vec::with_capacity(processors.len());
    for processor in processors {
        reports.push(processor.shutdown().await.expect("clean stop"));
    }
    reports
}

/// The processor builder of these tests.
pub(crate) type Builder = txoutbox_core::processor::ProcessorBuilder<
    txoutbox_sea_orm::SeaOrmOutboxStore,
    JetStreamPublisher,
>;

/// A retry policy of `max_attempts` with a quick backoff (50 ms up to
/// 200 ms).
pub(crate) fn quick_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::new(
        max_attempts,
        Duration::from_millis(50),
        Duration::from_millis(200),
    )
}

/// Saves a new order `id` (placed with `total_cents`) through the outbox's
/// repository.
pub(crate) async fn save_new_order(outbox: &Outbox, id: &str, total_cents: i64) {
    save_order(outbox, &mut Order::place(id, total_cents).expect("record")).await;
}

/// Saves `order` (with the events recorded on it) through the outbox's
/// repository.
pub(crate) async fn save_order(outbox: &Outbox, order: &mut Order) {
    outbox
        .repository::<Order>()
        .save(order)
        .await
        .expect("save");
}

/// A writer task that, until [stopped](Self::stop), writes rounds of 5 new
/// orders (2 events each) and, from the fourth round on, amends (twice) the
/// orders of three rounds before, so aggregates' histories span a long
/// time.
pub(crate) struct RoundWriter {
    stopping: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<usize>,
}

impl RoundWriter {
    /// Starts writing to `outbox`.
    pub(crate) fn spawn(outbox: &Outbox) -> Self {
        let stopping = Arc::new(AtomicBool::new(false));
        let (outbox, stopped) = (outbox.clone(), Arc::clone(&stopping));
        let task = tokio::spawn(async move {
            let mut round = 0;
            while !stopped.load(Ordering::Acquire) {
                write_orders(&outbox, &format!("r{round}"), 5, 2, 5).await;
                if round >= 3 {
                    for n in 0..5 {
                        amend_order(&outbox, &format!("r{}-{n}", round - 3), 2).await;
                    }
                }
                round += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            round
        });
        Self { stopping, task }
    }

    /// Stops it after its current round; returns the number of rounds.
    pub(crate) async fn stop(self) -> usize {
        self.stopping.store(true, Ordering::Release);
        self.task.await.expect("writer")
    }
}

/// The end of a test with traffic: stops the writer, waits until every row
/// is published, checks that each was published cleanly and that the
/// stream holds each once in per-aggregate order, then shuts `processor`
/// down.
pub(crate) async fn stop_writing_and_check(
    setup: &Setup,
    writer: RoundWriter,
    processor: ProcessorHandle,
) {
    let (test, stream, _, table) = setup.parts();
    writer.stop().await;
    drain_all(test, table).await;
    assert_all_published_cleanly(test, table).await;
    assert_stream_matches_outbox(stream, test, table).await;
    processor.shutdown().await.expect("clean shutdown");
}

/// Waits (up to 30 s) until every row of `table`, as many as there are now,
/// is published; returns their number.
pub(crate) async fn drain_all(test: &TestDb, table: &str) -> i64 {
    let total = test.count(table, "1=1").await;
    wait_all_published(test, table, total).await;
    total
}

/// Waits (up to 30 s) until `total` rows of `table` are published.
pub(crate) async fn wait_all_published(test: &TestDb, table: &str, total: i64) {
    wait_all_published_within(test, table, total, Duration::from_secs(30)).await;
}

/// Waits (up to `timeout`) until `total` rows of `table` are published.
pub(crate) async fn wait_all_published_within(
    test: &TestDb,
    table: &str,
    total: i64,
    timeout: Duration,
) {
    let what = "every row is published";
    wait_for_rows(test, table, "status = 1", total, timeout, what).await;
}

/// Polls every 50 ms until exactly `rows` rows of `table` match `filter`
/// (an SQL condition); panics with `what` after `timeout`.
pub(crate) async fn wait_for_rows(
    test: &TestDb,
    table: &str,
    filter: &str,
    rows: i64,
    timeout: Duration,
    what: &str,
) {
    wait_until(timeout, what, || async {
        test.count(table, filter).await == rows
    })
    .await;
}

/// [`assert_once_in_order`] for the whole stream against every row of
/// `table`.
pub(crate) async fn assert_stream_matches_outbox(stream: &TestStream, test: &TestDb, table: &str) {
    assert_once_in_order(&read_all(stream).await, &row_ids(test, table, "1=1").await);
}

/// Every row of `table` is published, with no attempt spent and no lease
/// left.
pub(crate) async fn assert_all_published_cleanly(test: &TestDb, table: &str) {
    assert_eq!(
        test.count(
            table,
            "status <> 1 OR attempts <> 0 OR lease_token IS NOT NULL"
        )
        .await,
        0,
        "nothing dead, no attempt spent, no lease left"
    );
}

/// Saves `orders` new orders named `<tag>-<n>`, each with `events` events
/// (placed, then amended `events - 1` times), `per_txn` orders per unit of
/// work. Returns the number of outbox rows written.
pub(crate) async fn write_orders(
    outbox: &Outbox,
    tag: &str,
    orders: usize,
    events: usize,
    per_txn: usize,
) -> usize {
    assert!(events >= 1 && per_txn >= 1);
    let mut written = 0;
    let mut next = 0;
    while next < orders {
        let mut uow = outbox.begin();
        for n in next..(next + per_txn).min(orders) {
            let mut order = Order::place(format!("{tag}-{n}"), 100).expect("record");
            for k in 1..events {
                order.amend(100 + k as i64).expect("record");
            }
            uow.save(&mut order).await.expect("save");
            written += events;
        }
        uow.commit().await.expect("commit");
        next += per_txn;
    }
    written
}

/// A new unit of work on `outbox` and the existing order `id` loaded in
/// it, for the test to record events on, save and commit.
pub(crate) async fn begin_with_order(outbox: &Outbox, id: &str) -> (UnitOfWork, Order) {
    let mut uow = outbox.begin();
    let order = uow
        .load::<Order>(id.to_owned())
        .await
        .expect("load")
        .expect("the order exists");
    (uow, order)
}

/// Amends the existing order `id` `times` times in one unit of work.
pub(crate) async fn amend_order(outbox: &Outbox, id: &str, times: usize) {
    let (mut uow, mut order) = begin_with_order(outbox, id).await;
    for k in 0..times {
        order.amend(1_000 + k as i64).expect("record");
    }
    uow.save(&mut order).await.expect("save");
    uow.commit().await.expect("commit");
}

/// The ids of the outbox rows matching `filter` (an SQL condition).
pub(crate) async fn row_ids(test: &TestDb, table: &str, filter: &str) -> HashSet<Uuid> {
    let rows = test
        .rows(&format!("SELECT id FROM {table} WHERE {filter}"))
        .await;
    rows.iter()
        .map(|row| row.try_get::<Uuid>("", "id").expect("id"))
        .collect()
}

/// Starts the `outbox-test-processor` binary as a processor process on
/// `test`'s schema, publishing under `prefix`, with `args` (see the binary).
pub(crate) async fn processor_process(
    test: &TestDb,
    prefix: &str,
    args: &[&str],
) -> txoutbox_suite::process::ProcessorProcess {
    txoutbox_suite::process::ProcessorProcess::start(
        env!("CARGO_BIN_EXE_outbox-test-processor"),
        test,
        prefix,
        args,
    )
    .await
}

/// Starts the `outbox-test-consumer` binary on `setup`'s schema and
/// stream: durable `effects`, ack wait 3 s, wired the default way (inbox
/// handlers: order kept), plus `extra` arguments (see the binary).
pub(crate) async fn ordered_consumer(
    setup: &Setup,
    extra: &[&str],
) -> txoutbox_suite::process::ProcessorProcess {
    match try_consumer(setup, extra).await {
        Ok(started) => started,
        Err(output) => panic!("the consumer did not start: {output}"),
    }
}

/// [`ordered_consumer`], or what the process wrote when it did not start.
pub(crate) async fn try_consumer(
    setup: &Setup,
    extra: &[&str],
) -> Result<txoutbox_suite::process::ProcessorProcess, String> {
    start_consumer(setup, Some("3000"), extra).await
}

/// [`ordered_consumer`] with the library's default ack wait (30 s), as a
/// service that sets nothing has it.
pub(crate) async fn default_consumer(setup: &Setup) -> txoutbox_suite::process::ProcessorProcess {
    match start_consumer(setup, None, &[]).await {
        Ok(started) => started,
        Err(output) => panic!("the consumer did not start: {output}"),
    }
}

/// Starts the consumer binary with `ack_wait_ms` (the library's default
/// when `None`) and `extra` arguments.
async fn start_consumer(
    setup: &Setup,
    ack_wait_ms: Option<&str>,
    extra: &[&str],
) -> Result<txoutbox_suite::process::ProcessorProcess, String> {
    let mut args = vec!["--stream", &setup.stream.name, "--durable", "effects"];
    if let Some(ms) = ack_wait_ms {
        args.extend(["--ack-wait-ms", ms]);
    }
    args.extend_from_slice(extra);
    txoutbox_suite::process::ProcessorProcess::try_start(
        env!("CARGO_BIN_EXE_outbox-test-consumer"),
        &setup.test,
        &setup.stream.prefix,
        &args,
    )
    .await
}

/// Waits for a moment mid-batch to disturb a processor at, while it drains
/// a backlog of `total` messages in batches of `batch`: at least `at_least`
/// messages are in the stream, and not a whole number of batches. Polls the
/// stream's count every 2 ms (a moment between two publishes of one batch is
/// a few milliseconds); panics after 30 s, or once all `total` are stored
/// (drained before the moment came). Returns the count.
pub(crate) async fn wait_mid_batch(
    stream: &TestStream,
    total: usize,
    at_least: usize,
    batch: usize,
) -> u64 {
    let timeout = Duration::from_secs(30);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let count = stream.count().await;
        let stored = count as usize;
        assert!(stored < total, "drained before a moment mid-batch came");
        if stored >= at_least && !stored.is_multiple_of(batch) {
            return count;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for a moment mid-batch ({count} in the stream)"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Polls `check` every 50 ms until it holds; panics with `what` after
/// `timeout`.
pub(crate) async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates a file-backed stream capturing `<prefix>.>` on a private server
/// (file storage survives the server's restarts) and wraps it as a
/// [`TestStream`].
pub(crate) async fn file_stream(client: async_nats::Client, prefix: &str) -> TestStream {
    let jetstream = jetstream::new(client);
    let name = format!("P_{prefix}");
    StreamSpec::new(&name, [format!("{prefix}.>")])
        .storage(StorageType::File)
        .processor_lease(Duration::from_secs(30))
        .ensure(&jetstream)
        .await
        .expect("create the stream");
    TestStream {
        jetstream,
        name,
        prefix: prefix.to_owned(),
    }
}

/// Every message of `stream`, decoded, in stream order, with its stream
/// sequence; read with one ordered consumer (fast for tens of thousands).
pub(crate) async fn read_all(stream: &TestStream) -> Vec<(u64, OutboxMessage)> {
    let handle = stream
        .jetstream
        .get_stream(&stream.name)
        .await
        .expect("the stream exists");
    let count = stream.count().await as usize;
    let mut out = Vec::with_capacity(count);
    if count == 0 {
        return out;
    }
    // A replicated stream may refuse consumers for a moment after a node
    // came back, and an ordered consumer made then may stall (a leader
    // change under it): ask again for up to 60 s, each new consumer starting
    // after the last message read. What is checked is the stream's content,
    // not the liveness of one reader.
    let deadline = Instant::now() + Duration::from_secs(60);
    'reading: loop {
        let next = out.last().map_or(1, |(sequence, _)| sequence + 1);
        let config = pull::OrderedConfig {
            deliver_policy: async_nats::jetstream::consumer::DeliverPolicy::ByStartSequence {
                start_sequence: next,
            },
            ..Default::default()
        };
        let consumer = match handle.create_consumer(config).await {
            Ok(consumer) => consumer,
            Err(err) if Instant::now() < deadline => {
                eprintln!("ordered consumer not created yet: {err}");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(err) => panic!("ordered consumer: {err}"),
        };
        let mut messages = consumer.messages().await.expect("consume");
        while out.len() < count {
            let message = match tokio::time::timeout(Duration::from_secs(10), messages.next()).await
            {
                Ok(message) => message.expect("the consumer ended").expect("a message"),
                Err(_) if Instant::now() < deadline => {
                    eprintln!(
                        "reading the stream stalled after {} messages; reading on with a new consumer",
                        out.len()
                    );
                    continue 'reading;
                }
                Err(_) => panic!(
                    "reading the stream timed out after {} of {count} messages",
                    out.len()
                ),
            };
            let sequence = message.info().expect("jetstream metadata").stream_sequence;
            if out.last().is_some_and(|(last, _)| sequence <= *last) {
                // Read before (an ordered consumer that reset itself may
                // start again from the stream's start): the stream is read
                // in order, and a copy stored twice has a sequence of its
                // own, so it is still kept and found.
                continue;
            }
            out.push((
                sequence,
                decode_stored(&message.subject, message.headers.as_ref(), &message.payload),
            ));
        }
        return out;
    }
}

/// [`assert_once_in_order`] on the first copy of each message, for a
/// server that may store a retried publish twice (nats-server before 2.10
/// across a leader change: its clustered dedup was not deterministic, fixed
/// upstream in nats-server PR #6415). Returns how many extra copies the
/// stream held; a consumer's inbox applies each once.
pub(crate) fn assert_first_copies_in_order(
    stored: &[(u64, OutboxMessage)],
    expected: &HashSet<Uuid>,
) -> usize {
    let mut seen: HashSet<Uuid> = HashSet::with_capacity(stored.len());
    let first: Vec<(u64, OutboxMessage)> = stored
        .iter()
        .filter(|(_, m)| seen.insert(*m.id.as_uuid()))
        .cloned()
        .collect();
    assert_once_in_order(&first, expected);
    stored.len() - first.len()
}

/// The acceptance check: the stream holds exactly the messages `expected`
/// (no id missing, none extra, none twice), and for every aggregate the
/// sequence numbers in stream order are strictly increasing.
pub(crate) fn assert_once_in_order(stored: &[(u64, OutboxMessage)], expected: &HashSet<Uuid>) {
    let mut seen: HashSet<Uuid> = HashSet::with_capacity(stored.len());
    let twice: Vec<Uuid> = stored
        .iter()
        .map(|(_, m)| *m.id.as_uuid())
        .filter(|id| !seen.insert(*id))
        .collect();
    assert!(
        twice.is_empty(),
        "{} message id(s) stored twice, e.g. {:?}",
        twice.len(),
        &twice[..twice.len().min(3)]
    );
    let missing = expected.difference(&seen).count();
    let extra = seen.difference(expected).count();
    assert!(
        missing == 0 && extra == 0,
        "stream and outbox differ: {missing} row(s) missing from the stream, {extra} unexpected \
         message(s) in it ({} stored, {} expected)",
        stored.len(),
        expected.len()
    );
    let mut last: HashMap<(&str, &str), (u64, u64)> = HashMap::new();
    for (stream_sequence, message) in stored {
        let key = (
            message.aggregate_type.as_str(),
            message.aggregate_id.as_str(),
        );
        if let Some((previous, at)) = last.get(&key) {
            assert!(
                message.sequence > *previous,
                "order broken for {key:?}: sequence {} stored at {stream_sequence} after \
                 sequence {previous} at {at}",
                message.sequence
            );
        }
        last.insert(key, (message.sequence, *stream_sequence));
    }
}
