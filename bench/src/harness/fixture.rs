//! What the processor parts share: a fresh PostgreSQL schema with the outbox
//! and `orders` tables, a fresh file-backed JetStream stream with a subject
//! prefix of its own, ~300-byte events, and a fast backlog fill.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::jetstream;
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, Set};
use serde::{Deserialize, Serialize};
use txoutbox_core::{AggregateRoot, EventBuffer, IntegrationEvent, RecordError};
use txoutbox_fixtures::orders::entity;
use txoutbox_nats::{NatsConnect, StreamSpec};
use txoutbox_sea_orm::{AggregateEntity, Outbox, OutboxConfig, create_schema};

use crate::harness::error::BoxError;

/// Bytes of every event's JSON payload (as serialized; PostgreSQL's `jsonb`
/// adds a space after each colon when it reads it back).
pub(crate) const PAYLOAD_BYTES: usize = 300;

/// `application_name` of every bench connection, to tell other clients of
/// the database apart in `pg_stat_activity`.
pub(crate) const APPLICATION_NAME: &str = "txoutbox-bench";

/// The processor's lease in every part (its default).
pub(crate) const LEASE: Duration = Duration::from_secs(30);

/// The PostgreSQL server: `OUTBOX_TEST_POSTGRES_URL`, default
/// `postgres://postgres@127.0.0.1:5432/test`.
/// A part that runs on a private server sets it with [`use_postgres`].
pub(crate) fn postgres_url() -> String {
    if let Some(url) = POSTGRES_URL
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
    {
        return url;
    }
    std::env::var("OUTBOX_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The server [`postgres_url`] names instead of the environment's, while set.
static POSTGRES_URL: std::sync::RwLock<Option<String>> = std::sync::RwLock::new(None);

/// Points every schema, pool and drain child made from now on at `url` (a
/// part's private server), or back at the environment's server (`None`).
pub(crate) fn use_postgres(url: Option<String>) {
    *POSTGRES_URL
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = url;
}

/// The nats-server: `OUTBOX_TEST_NATS_URL`, default `127.0.0.1:4222`.
pub(crate) fn nats_url() -> String {
    txoutbox_fixtures::jetstream::nats_url()
}

/// A client of the nats-server at `url` (or any of a comma-separated list)
/// that rides out its crashes and restarts: connected in the background if
/// the server is down at the start, reconnecting every 100 ms.
pub(crate) async fn reconnecting_client(url: &str) -> Result<async_nats::Client, BoxError> {
    let options = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .reconnect_delay_callback(|_| Duration::from_millis(100));
    Ok(NatsConnect::new(url).connect_with(options).await?)
}

/// The event every part publishes: ~300 bytes of JSON.
#[derive(Debug, Clone, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "bench.event")]
pub(crate) struct BenchEvent {
    key: String,
    pad: String,
}

impl BenchEvent {
    /// An event whose serialized JSON is [`PAYLOAD_BYTES`] long (for keys
    /// shorter than that).
    pub(crate) fn new(key: String) -> Self {
        // `{"key":"…","pad":"…"}` is 19 bytes around the two strings.
        let pad = PAYLOAD_BYTES.saturating_sub(19 + key.len());
        Self {
            key,
            pad: "x".repeat(pad),
        }
    }
}

/// An aggregate of the latency writers: a row of the `orders` fixture table
/// plus one [`BenchEvent`] per save, like a service placing orders.
#[derive(Debug, AggregateRoot)]
#[aggregate(type = "bench_order")]
pub(crate) struct BenchOrder {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
}

impl BenchOrder {
    /// A new order that recorded one event.
    pub(crate) fn place(id: String) -> Result<Self, RecordError> {
        let mut order = Self {
            id: id.clone(),
            events: EventBuffer::new(),
        };
        order.record(BenchEvent::new(id))?;
        Ok(order)
    }

    /// A new order that recorded one event, keyed `key` (so its event can
    /// be found by its key, as [`amend`](Self::amend)'s).
    pub(crate) fn place_keyed(id: String, key: String) -> Result<Self, RecordError> {
        let mut order = Self {
            id,
            events: EventBuffer::new(),
        };
        order.record(BenchEvent::new(key))?;
        Ok(order)
    }

    /// Records one more event, keyed `key`.
    pub(crate) fn amend(&mut self, key: String) -> Result<(), RecordError> {
        self.record(BenchEvent::new(key))
    }
}

impl AggregateEntity for BenchOrder {
    type Entity = entity::Entity;

    fn version_column() -> entity::Column {
        entity::Column::Version
    }

    fn from_model(model: entity::Model, events: EventBuffer) -> Self {
        Self {
            id: model.id,
            events,
        }
    }

    fn to_active_model(&self) -> entity::ActiveModel {
        entity::ActiveModel {
            id: Set(self.id.clone()),
            status: Set("placed".to_owned()),
            total_cents: Set(100),
            ..Default::default()
        }
    }
}

/// A fresh schema with the outbox table (default name) and `orders`,
/// dropped on drop.
#[derive(Debug)]
pub(crate) struct BenchDb {
    /// The schema's name.
    pub(crate) schema: String,
}

impl BenchDb {
    /// Creates the schema and its tables.
    pub(crate) async fn create() -> Result<Self, BoxError> {
        let schema = format!(
            "outbox_bench_{}",
            &uuid::Uuid::now_v7().simple().to_string()[16..]
        );
        let admin = admin().await?;
        admin
            .execute_unprepared(&format!("CREATE SCHEMA {schema}"))
            .await?;
        admin.close().await?;
        let bench = Self { schema };
        let db = bench.connect(2).await?;
        create_schema(&db, &OutboxConfig::default()).await?;
        txoutbox_fixtures::orders::create_table(&db).await?;
        db.close().await?;
        Ok(bench)
    }

    /// A pool of up to `connections` to the schema.
    pub(crate) async fn connect(&self, connections: u32) -> Result<DatabaseConnection, BoxError> {
        connect_schema(&self.schema, connections).await
    }
}

impl Drop for BenchDb {
    fn drop(&mut self) {
        let drop_sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema);
        txoutbox_fixtures::db::execute_detached(with_application_name(&postgres_url()), drop_sql);
    }
}

/// A connection to the database itself (no schema), for DDL and statistics.
pub(crate) async fn admin() -> Result<DatabaseConnection, BoxError> {
    let mut options = ConnectOptions::new(with_application_name(&postgres_url()));
    options.max_connections(1).sqlx_logging(false);
    Ok(Database::connect(options).await?)
}

/// A pool of up to `connections` whose search path is `schema`.
pub(crate) async fn connect_schema(
    schema: &str,
    connections: u32,
) -> Result<DatabaseConnection, BoxError> {
    let mut options = ConnectOptions::new(with_application_name(&postgres_url()));
    options
        .set_schema_search_path(schema.to_owned())
        .max_connections(connections)
        .test_before_acquire(false)
        .sqlx_logging(false);
    Ok(Database::connect(options).await?)
}

/// A pool of up to `connections` to the database at `url` (PostgreSQL or
/// MariaDB), with `schema` on PostgreSQL's search path when given: how a
/// child reaches a database its parent names by URL.
pub(crate) async fn connect_url(
    url: &str,
    schema: Option<&str>,
    connections: u32,
) -> Result<DatabaseConnection, BoxError> {
    let url = if url.starts_with("postgres") {
        with_application_name(url)
    } else {
        url.to_owned()
    };
    let mut options = ConnectOptions::new(url);
    if let Some(schema) = schema {
        options.set_schema_search_path(schema.to_owned());
    }
    options
        .max_connections(connections)
        .test_before_acquire(false)
        .sqlx_logging(false);
    Ok(Database::connect(options).await?)
}

/// A child's pool of up to `connections`: to `--url` (with `--schema` on
/// the search path, if given) when its `args` name one, else to `--schema`
/// on [`postgres_url`]'s server.
pub(crate) async fn connect_child(
    args: &[String],
    part: &str,
    connections: u32,
) -> Result<DatabaseConnection, BoxError> {
    let schema = flag_value(args, part, "--schema").ok();
    match flag_value(args, part, "--url") {
        Ok(url) => connect_url(url, schema, connections).await,
        Err(_) => connect_schema(flag_value(args, part, "--schema")?, connections).await,
    }
}

/// [`connect_schema`] for a pool that outlives crashes of its server:
/// each connection is tested before it is handed out (a connection the
/// crash ended is replaced, not used), and waiting for one gives up after
/// `acquire_timeout`.
pub(crate) async fn connect_schema_tested(
    schema: &str,
    connections: u32,
    acquire_timeout: Duration,
) -> Result<DatabaseConnection, BoxError> {
    let mut options = ConnectOptions::new(with_application_name(&postgres_url()));
    options
        .set_schema_search_path(schema.to_owned())
        .max_connections(connections)
        .test_before_acquire(true)
        .acquire_timeout(acquire_timeout)
        .sqlx_logging(false);
    Ok(Database::connect(options).await?)
}

fn with_application_name(url: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}application_name={APPLICATION_NAME}")
}

/// The outbox settings of a part: derived subjects under `prefix`.
pub(crate) fn config(prefix: &str) -> Result<OutboxConfig, BoxError> {
    Ok(OutboxConfig::default().with_subject_prefix(prefix)?)
}

/// A client of the servers at `urls` (comma-separated, as
/// `OUTBOX_TEST_NATS_URL` may list a cluster's nodes).
pub(crate) async fn connect(urls: &str) -> Result<async_nats::Client, BoxError> {
    Ok(NatsConnect::new(urls).connect().await?)
}

/// Where a part publishes: the shared nats-server, or a private server or
/// cluster a part started (its client URLs, comma-separated) and the
/// replicas its streams get.
#[derive(Debug, Clone)]
pub(crate) struct Broker {
    /// Client URLs, comma-separated (as `OUTBOX_TEST_NATS_URL` takes them).
    pub(crate) urls: String,
    /// Replicas of every stream created on it.
    pub(crate) replicas: usize,
}

impl Broker {
    /// The machine's shared nats-server ([`nats_url`]), one replica.
    pub(crate) fn shared() -> Self {
        Self {
            urls: nats_url(),
            replicas: 1,
        }
    }
}

/// A fresh file-backed stream capturing `<prefix>.>`, like production's.
#[derive(Debug)]
pub(crate) struct BenchStream {
    /// The connection it was created on.
    pub(crate) client: async_nats::Client,
    /// The stream's name.
    pub(crate) name: String,
    /// The subject prefix it captures.
    pub(crate) prefix: String,
}

impl BenchStream {
    /// Connects to the shared server and creates the stream.
    pub(crate) async fn create() -> Result<Self, BoxError> {
        Self::create_on(&Broker::shared()).await
    }

    /// Connects to `broker` and creates the stream with its replicas.
    pub(crate) async fn create_on(broker: &Broker) -> Result<Self, BoxError> {
        let client = connect(&broker.urls).await?;
        let tag = &uuid::Uuid::now_v7().simple().to_string()[16..];
        let (name, prefix) = (format!("BENCH_{tag}"), format!("bench{tag}"));
        StreamSpec::new(&name, [format!("{prefix}.>")])
            .replicas(broker.replicas)
            // Leftovers of a run that could not delete its stream expire.
            .max_age(Duration::from_secs(3600))
            .processor_lease(LEASE)
            .ensure(&jetstream::new(client.clone()))
            .await?;
        Ok(Self {
            client,
            name,
            prefix,
        })
    }

    /// Messages the stream holds.
    pub(crate) async fn messages(&self) -> Result<u64, BoxError> {
        let mut stream = jetstream::new(self.client.clone())
            .get_stream(&self.name)
            .await?;
        Ok(stream.info().await?.state.messages)
    }

    /// Deletes the stream.
    pub(crate) async fn delete(self) -> Result<(), BoxError> {
        jetstream::new(self.client.clone())
            .delete_stream(&self.name)
            .await?;
        Ok(())
    }
}

/// Standalone messages per fill transaction (inserted 1,000 rows per
/// statement by the unit of work).
const FILL_PER_TRANSACTION: u64 = 5_000;
/// Concurrent fill transactions.
const FILL_TASKS: u64 = 2;

/// Writes `rows` pending [`BenchEvent`]s through the unit of work (each its
/// own aggregate, as `UnitOfWork::enqueue` makes them), then `VACUUM
/// ANALYZE`s the table so every drain starts from a settled table. Returns
/// the seconds it took (not a measured figure).
pub(crate) async fn fill(bench: &BenchDb, prefix: &str, rows: u64) -> Result<f64, BoxError> {
    let started = std::time::Instant::now();
    let db = bench.connect(FILL_TASKS as u32).await?;
    let outbox = Outbox::new(db.clone(), config(prefix)?.without_notify());
    let next = std::sync::Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..FILL_TASKS {
        let (outbox, next) = (outbox.clone(), std::sync::Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            loop {
                let from = next.fetch_add(FILL_PER_TRANSACTION, Ordering::Relaxed);
                if from >= rows {
                    return Ok::<_, BoxError>(());
                }
                let mut uow = outbox.begin();
                for n in from..(from + FILL_PER_TRANSACTION).min(rows) {
                    uow.enqueue(&BenchEvent::new(format!("backlog-{n}")))?;
                }
                uow.commit().await?;
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    db.execute_unprepared("VACUUM ANALYZE outbox_messages")
        .await?;
    drop(outbox);
    // Closing the pool ends its backends, which flushes their statistics
    // now rather than during the measurement that follows.
    db.close().await?;
    Ok(started.elapsed().as_secs_f64())
}

/// The value after `flag` in a child process's `args`, or an error naming
/// the child `part` and the missing flag.
pub(crate) fn flag_value<'a>(
    args: &'a [String],
    part: &str,
    flag: &str,
) -> Result<&'a str, crate::harness::error::BoxError> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
        .ok_or_else(|| format!("{part} needs {flag} <value>").into())
}
