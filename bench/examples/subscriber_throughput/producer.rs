//! The producer's side in the same run: how fast the processor (default
//! settings) drains a backlog of the bench's events from the outbox table
//! into a memory stream, for the consumer's rates to be read against it.

use std::time::{Duration, Instant};

use async_nats::jetstream::Context;
use sea_orm::DatabaseConnection;
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::{Outbox, OutboxConfig, create_schema};

use crate::stream::{create, holding};
use crate::{Result, Step};

/// Events per transaction while the backlog is written (not timed).
const PER_TRANSACTION: u64 = 1_000;

/// Writes `count` events to a fresh outbox table, then times one processor
/// (default settings) from its start until the stream holds them all;
/// returns the drain's duration.
pub(crate) async fn drain(
    js: &Context,
    db: &DatabaseConnection,
    tag: &str,
    count: u64,
) -> Result<Duration> {
    let (stream, prefix) = (format!("TPUT_{tag}_PRODUCER"), format!("tput{tag}p"));
    create(js, &stream, &prefix).await?;
    let measured = async {
        let config = OutboxConfig::default()
            .with_table(format!("producer_{tag}"))?
            .with_subject_prefix(&prefix)?
            .without_notify();
        create_schema(db, &config).await?;
        let outbox = Outbox::new(db.clone(), config);
        let mut written = 0;
        while written < count {
            let mut uow = outbox.begin();
            for n in written..(written + PER_TRANSACTION).min(count) {
                uow.enqueue(&Step { n })?;
            }
            written += uow.commit().await?.len() as u64;
        }
        let publisher = JetStreamPublisher::new(js.client(), "/bench");
        let processor = outbox.processor(publisher).build()?;
        let started = Instant::now();
        let running = processor.spawn();
        holding(js, &stream, count).await?;
        let elapsed = started.elapsed();
        running.shutdown().await?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(elapsed)
    }
    .await;
    js.delete_stream(&stream).await?;
    measured
}
