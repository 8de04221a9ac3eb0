//! Messages per second through a typed subscriber, next to the raw pull
//! consumer, in one run against this machine's nats-server and PostgreSQL.
//!
//! ```sh
//! cargo run --release -p txoutbox-bench --example subscriber_throughput -- 20000
//! ```
//!
//! Publishes N envelopes (100 aggregates) to a fresh memory stream, then
//! drains them with three durable consumers, one after another, each timed
//! from its start until the server holds every ack:
//!
//! 1. raw: `consumer.stream()`, ack each message, no decoding;
//! 2. typed: a [`Subscriber`] with a no-op handler (envelope and payload
//!    decoded, per-aggregate lanes, metrics, span);
//! 3. inbox: the same with an `txoutbox_sea_orm::Inbox` handler on
//!    PostgreSQL (a transaction per message: inbox insert + commit).
//!
//! `NATS_URL` (default `nats://127.0.0.1:4222`) and `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`; a schema of its own is
//! created and dropped).

use std::error::Error;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::consumer::{AckPolicy, pull};
use async_nats::jetstream::stream::{Config, StorageType};
use async_nats::jetstream::{self, Context};
use futures::StreamExt;
use sea_orm::{ConnectOptions, ConnectionTrait, Database};
use serde::{Deserialize, Serialize};
use txoutbox_core::{
    AggregateRef, IntegrationEvent, MessageContext, OutboxMessage, PendingMessage, SubjectPrefix,
    wire,
};
use txoutbox_nats::subscriber::{DeadLetterPolicy, Subscriber};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, create_schema};

#[derive(Serialize, Deserialize, IntegrationEvent)]
#[event(name = "bench.step")]
struct Step {
    n: u64,
}

const AGGREGATES: u64 = 100;

type Result<T = ()> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

#[tokio::main]
async fn main() -> Result {
    let count: u64 = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(20_000);
    let nats_url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let database_url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());

    let tag = &uuid::Uuid::now_v7().simple().to_string()[16..];
    let (stream, prefix) = (format!("TPUT_{tag}"), format!("tput{tag}"));
    let js = jetstream::new(async_nats::connect(&nats_url).await?);
    js.create_stream(Config {
        name: stream.clone(),
        subjects: vec![format!("{prefix}.>")],
        storage: StorageType::Memory,
        max_age: Duration::from_secs(600),
        ..Default::default()
    })
    .await?;

    let schema = format!("tput_{tag}");
    let admin = Database::connect(&database_url).await?;
    admin
        .execute_unprepared(&format!("CREATE SCHEMA {schema}"))
        .await?;

    let outcome = run(&js, &stream, &prefix, count, &database_url, &schema).await;

    js.delete_stream(&stream).await?;
    admin
        .execute_unprepared(&format!("DROP SCHEMA {schema} CASCADE"))
        .await?;
    outcome
}

async fn run(
    js: &Context,
    stream: &str,
    prefix: &str,
    count: u64,
    database_url: &str,
    schema: &str,
) -> Result {
    publish(js, prefix, count).await?;
    println!(
        "{count} messages, {AGGREGATES} aggregates, memory stream, nats-server at {}",
        js.client().server_info().version
    );
    println!("{:<44} {:>9} {:>12}", "path", "seconds", "messages/s");
    let report = |name: &str, elapsed: Duration| {
        println!(
            "{name:<44} {:>9.3} {:>12.0}",
            elapsed.as_secs_f64(),
            count as f64 / elapsed.as_secs_f64()
        );
    };

    // 1. The raw pull consumer: fetch and ack, nothing else.
    let consumer = js
        .get_stream(stream)
        .await?
        .create_consumer(pull::Config {
            durable_name: Some("raw".into()),
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        })
        .await?;
    let started = Instant::now();
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(256)
        .messages()
        .await?;
    for _ in 0..count {
        let message = messages.next().await.ok_or("stream ended")??;
        message.ack().await?;
    }
    settled(js, stream, "raw").await?;
    report("raw pull consumer (fetch + ack)", started.elapsed());
    drop(messages);

    // 2. A typed subscriber with a handler that does nothing.
    let started = Instant::now();
    let running = Subscriber::builder(js.clone(), "typed")
        .stream(stream)
        // Nothing fails here; no dead-letter stream to litter the server with.
        .dead_letter(DeadLetterPolicy::terminate())
        .max_in_flight(256)
        .on(|_: Step, _: txoutbox_core::Delivery| async { Ok(()) })
        .unordered()
        .build()
        .await?
        .spawn();
    settled(js, stream, "typed").await?;
    let elapsed = started.elapsed();
    running.shutdown().await?;
    report("typed subscriber, no-op handler", elapsed);

    // 3. The same with an inbox handler on PostgreSQL.
    let mut options = ConnectOptions::new(database_url);
    options
        .set_schema_search_path(schema.to_owned())
        .max_connections(32)
        .sqlx_logging(false);
    let db = Database::connect(options).await?;
    let config = OutboxConfig::default().without_notify();
    create_schema(&db, &config).await?;
    let outbox = Outbox::new(db.clone(), config);
    let inbox = Inbox::new(&outbox, "inbox")?;
    let started = Instant::now();
    let running = Subscriber::builder(js.clone(), "inbox")
        .stream(stream)
        // Nothing fails here; no dead-letter stream to litter the server with.
        .dead_letter(DeadLetterPolicy::terminate())
        .max_in_flight(64)
        .on(inbox.handler_boxed(|_: Step, _, _| Box::pin(async { Ok(()) })))
        .build()
        .await?
        .spawn();
    settled(js, stream, "inbox").await?;
    let elapsed = started.elapsed();
    running.shutdown().await?;
    let rows = db
        .query_one_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            "SELECT COUNT(*) AS n FROM outbox_inbox".to_owned(),
        ))
        .await?
        .ok_or("no count")?
        .try_get::<i64>("", "n")?;
    report("typed subscriber, inbox handler (PostgreSQL)", elapsed);
    if u64::try_from(rows)? != count {
        return Err(format!("the inbox holds {rows} rows, not {count}").into());
    }
    Ok(())
}

/// Publishes `count` envelopes as the outbox publisher would, pipelined.
async fn publish(js: &Context, prefix: &str, count: u64) -> Result {
    let prefix = SubjectPrefix::new(prefix)?;
    let mut acks = Vec::with_capacity(1000);
    for n in 0..count {
        let message = OutboxMessage::seal(
            PendingMessage::new(&Step { n })?,
            AggregateRef {
                aggregate_type: "bench".into(),
                aggregate_id: format!("a{}", n % AGGREGATES),
                sequence: n / AGGREGATES + 1,
            },
            &MessageContext::new(),
            &prefix,
        );
        let mut headers = HeaderMap::new();
        for (name, value) in wire::encode(&message, "/bench")? {
            headers.insert(name.as_ref(), value.as_str());
        }
        let payload = message.payload.as_bytes().to_vec();
        acks.push(
            js.publish_with_headers(message.subject, headers, payload.into())
                .await?,
        );
        if acks.len() == 1000 {
            for ack in acks.drain(..) {
                ack.await?;
            }
        }
    }
    for ack in acks {
        ack.await?;
    }
    Ok(())
}

/// Waits until `consumer` has had every message delivered and acked.
async fn settled(js: &Context, stream: &str, consumer: &str) -> Result {
    let stream = js.get_stream(stream).await?;
    loop {
        let info = stream.consumer_info(consumer).await?;
        if info.num_pending == 0 && info.num_ack_pending == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
