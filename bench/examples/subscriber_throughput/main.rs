//! Messages per second through a typed subscriber, next to the raw pull
//! consumer, and the handle latency of the inbox paths at a low rate, in
//! one run against this machine's nats-server and PostgreSQL.
//!
//! ```sh
//! cargo run --release -p txoutbox-bench --example subscriber_throughput -- 20000
//! cargo run --release -p txoutbox-bench --example subscriber_throughput -- latency  # that part only
//! cargo run --release -p txoutbox-bench --example subscriber_throughput -- repeat 20000 10
//! ```
//!
//! `repeat N RUNS` runs one shape only, RUNS times (see [`repeat`]): the
//! inbox groups with a no-op write on 10,000 aggregates.
//!
//! For each shape (100, 10,000 and 1 aggregates) it publishes N envelopes
//! to a fresh memory stream, then drains them with one durable consumer per
//! path, one after another, each timed from its start until the server
//! holds every ack (see [`paths`]):
//!
//! - raw: `consumer.stream()`, ack each message, no decoding;
//! - typed: a `Subscriber` with a plain handler (effects at least once);
//! - inbox per message: an `Inbox` handler, one transaction per message
//!   (`inbox_per_message`);
//! - inbox batched: the same in inbox groups (`inbox_groups`);
//! - inbox batched, batch handler: in inbox groups with a batch handler
//!   (`Inbox::batch_handler_with`) that writes a whole batch in one
//!   set-based statement;
//!
//! each handler with a no-op write and with a realistic one: an `UPDATE` of
//! the read-model row of the message's aggregate. The exactly-once paths
//! are checked: the read model counts every message once.
//!
//! First, the producer's side of the same run (see [`producer`]): one
//! processor with the default settings draining N events from the outbox
//! table into a memory stream; every path's line gives its rate as a
//! multiple of that drain rate.
//!
//! Then a consumer that is also a producer, with its processor in the same
//! process (see [`relay`]).
//!
//! Then the handle latency at 100 messages/s (see [`latency`]): from
//! before the publish until the subscriber's ack is seen on the wire,
//! per message and batched, with the realistic write.
//!
//! `INBOX_BATCH_TRANSACTIONS` sets how many groups run at once (default
//! `InboxGroups`' 2). `NATS_URL` (default `nats://127.0.0.1:4222`; the latency part reads v1
//! ack subjects, so a server before 2.14 or one without v2 subjects) and
//! `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`; a
//! schema of its own is created and dropped).

mod latency;
mod paths;
mod producer;
mod relay;
mod repeat;
mod stream;

use std::error::Error;
use std::time::Duration;

use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection};
use serde::{Deserialize, Serialize};
use txoutbox_core::IntegrationEvent;

/// The event every path handles.
#[derive(Serialize, Deserialize, IntegrationEvent)]
#[event(name = "bench.step")]
pub(crate) struct Step {
    /// Its number.
    pub(crate) n: u64,
}

/// The bench's result type.
pub(crate) type Result<T = ()> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// The shapes measured: how many aggregates the messages spread over.
const SHAPES: [u64; 3] = [100, 10_000, 1];

#[tokio::main]
async fn main() -> Result {
    txoutbox_examples::support::exit_on_help(include_str!("main.rs"));
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let repeat = std::env::args().nth(1).as_deref() == Some("repeat");
    // `latency` alone: the latency part only.
    let latency_only = std::env::args().nth(1).as_deref() == Some("latency");
    let number = |at: usize, default: u64| -> Result<u64> {
        match std::env::args().nth(at) {
            Some(n) => Ok(n.parse()?),
            None => Ok(default),
        }
    };
    let count: u64 = match std::env::args().nth(1) {
        Some(_) if repeat => number(2, 20_000)?,
        Some(n) if !latency_only => n.parse()?,
        _ => 20_000,
    };
    let nats_url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let database_url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let js = async_nats::jetstream::new(async_nats::connect(&nats_url).await?);
    let tag = uuid::Uuid::now_v7().simple().to_string()[16..].to_owned();
    let schema = format!("tput_{tag}");
    let admin = Database::connect(&database_url).await?;
    admin
        .execute_unprepared(&format!("CREATE SCHEMA {schema}"))
        .await?;
    let outcome = async {
        let db = connect(&database_url, &schema).await?;
        println!(
            "{count} messages per shape, memory streams, nats-server {}, PostgreSQL",
            js.client().server_info().version
        );
        if repeat {
            let runs = u32::try_from(number(3, 10)?)?;
            return repeat::measure(&js, &db, &tag, count, runs)
                .await
                .map(|_| ());
        }
        if !latency_only {
            let drained = producer::drain(&js, &db, &tag, count).await?;
            let producer_rate = count as f64 / drained.as_secs_f64();
            println!(
                "producer: the processor (default settings) drained {count} events from the outbox \
                 table in {:.3} s: {producer_rate:.0} events/s",
                drained.as_secs_f64()
            );
            for aggregates in SHAPES {
                paths::measure(&js, &db, &tag, (count, aggregates), producer_rate).await?;
            }
            relay::measure(&js, &db, &tag, count).await?;
        }
        latency::measure(&js, &db, &tag).await
    }
    .await;
    admin
        .execute_unprepared(&format!("DROP SCHEMA {schema} CASCADE"))
        .await?;
    outcome
}

async fn connect(database_url: &str, schema: &str) -> Result<DatabaseConnection> {
    let mut options = ConnectOptions::new(database_url);
    options
        .set_schema_search_path(schema.to_owned())
        .max_connections(32)
        .acquire_timeout(Duration::from_secs(30))
        .sqlx_logging(false);
    Ok(Database::connect(options).await?)
}
