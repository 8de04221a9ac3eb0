//! Handle latency at a low rate: 100 messages/s over 100 aggregates, each
//! timed from before its publish until the subscriber's ack for it is seen
//! on the wire (a plain NATS subscription to the consumer's ack subjects),
//! so a batched message's time includes its group's commit. Per message
//! and batched, with the read-model `UPDATE`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::Context;
use futures::StreamExt;
use sea_orm::DatabaseConnection;
use txoutbox_core::SubjectPrefix;
use txoutbox_nats::subscriber::{DeadLetterPolicy, Subscriber};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, create_schema};

use crate::Result;
use crate::paths::{Transactions, Write, batch_handler, batches, inbox_handler, reset_read_model};
use crate::stream::{create, envelope, settled};

const RATE: u64 = 100;
const MESSAGES: u64 = 1_000;
const AGGREGATES: u64 = 100;

/// Prints p50/p99 handle latency per message and batched.
pub(crate) async fn measure(js: &Context, db: &DatabaseConnection, tag: &str) -> Result {
    println!(
        "\nhandle latency, publish to ack, {MESSAGES} messages at {RATE}/s over {AGGREGATES} aggregates, UPDATE of the read model"
    );
    println!(
        "{:<56} {:>9} {:>9} {:>9}",
        "path", "p50 ms", "p99 ms", "max ms"
    );
    for transactions in Transactions::ALL {
        let mut latencies = one_path(js, db, tag, transactions).await?;
        latencies.sort_unstable();
        let at = |q: f64| {
            let index = ((latencies.len() as f64 - 1.0) * q).round() as usize;
            latencies[index].as_secs_f64() * 1000.0
        };
        println!(
            "{:<56} {:>9.2} {:>9.2} {:>9.2}",
            transactions.name(),
            at(0.5),
            at(0.99),
            at(1.0)
        );
    }
    Ok(())
}

async fn one_path(
    js: &Context,
    db: &DatabaseConnection,
    tag: &str,
    transactions: Transactions,
) -> Result<Vec<Duration>> {
    let durable = format!("latency_{transactions:?}").to_lowercase();
    let (stream, prefix) = (format!("LAT_{tag}_{durable}"), format!("lat{tag}{durable}"));
    create(js, &stream, &prefix).await?;
    let measured = async {
        reset_read_model(db, AGGREGATES).await?;
        let config = OutboxConfig::default().without_notify();
        create_schema(db, &config).await?;
        let outbox = Outbox::new(db.clone(), config);
        let inbox = Inbox::new(&outbox, &durable)?;
        let builder = Subscriber::builder(js.clone(), &durable)
            .stream(&stream)
            .dead_letter(DeadLetterPolicy::terminate());
        let builder = match transactions {
            Transactions::PerMessage => builder
                .on(inbox_handler(&inbox, Write::ReadModel))
                .inbox_per_message(),
            Transactions::Batched => builder
                .on(inbox_handler(&inbox, Write::ReadModel))
                .inbox_groups(batches()),
            Transactions::BatchHandler => builder
                .on(batch_handler(&inbox, Write::ReadModel))
                .inbox_groups(batches()),
        };
        let running = builder.build().await?.spawn();
        let acked: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
        let mut acks = js.client().subscribe(format!("$JS.ACK.{stream}.>")).await?;
        let watching = {
            let (acked, durable) = (Arc::clone(&acked), durable.clone());
            tokio::spawn(async move {
                while let Some(ack) = acks.next().await {
                    let positive = ack.payload.is_empty() || ack.payload.starts_with(b"+ACK");
                    if let (true, Some(sequence)) =
                        (positive, stream_sequence(&ack.subject, &durable))
                    {
                        let now = Instant::now();
                        if let Ok(mut acked) = acked.lock() {
                            acked.entry(sequence).or_insert(now);
                        }
                    }
                }
            })
        };
        js.client().flush().await?;
        let prefix = SubjectPrefix::new(&prefix)?;
        let mut published = HashMap::new();
        let mut every = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
        for n in 0..MESSAGES {
            every.tick().await;
            let (subject, headers, payload) = envelope(&prefix, n, AGGREGATES)?;
            let sent = Instant::now();
            let ack = js
                .publish_with_headers(subject, headers, payload.into())
                .await?
                .await?;
            published.insert(ack.sequence, sent);
        }
        settled(js, &stream, &durable).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        running.shutdown().await?;
        watching.abort();
        let acked = acked.lock().map_err(|_| "ack watch poisoned")?.clone();
        let latencies: Vec<Duration> = published
            .iter()
            .filter_map(|(sequence, sent)| acked.get(sequence).map(|at| at.duration_since(*sent)))
            .collect();
        if latencies.len() as u64 != MESSAGES {
            return Err(format!("{durable}: saw {} acks of {MESSAGES}", latencies.len()).into());
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(latencies)
    }
    .await;
    js.delete_stream(&stream).await?;
    measured
}

/// The stream sequence an ack subject names: v1
/// `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>..` (and v2, where
/// the consumer is also followed by the delivery count).
fn stream_sequence(subject: &str, durable: &str) -> Option<u64> {
    let tokens: Vec<&str> = subject.split('.').collect();
    let at = tokens.iter().position(|token| *token == durable)?;
    tokens.get(at + 2)?.parse().ok()
}
