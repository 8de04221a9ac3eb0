//! The baseline a processor must beat: the naive relay loop on the same
//! table, through the same store and publisher — claim a batch, publish it
//! pipelined, await every ack, mark the batch published, repeat. Each step
//! waits for the previous one, so the database idles while the broker works
//! and the other way round.

use std::time::Instant;

use futures::future::join_all;
use txoutbox_core::store::Published;
use txoutbox_core::{OutboxStore, Publisher};
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::{OutboxConfig, SeaOrmOutboxStore};

use crate::harness::error::BoxError;
use crate::harness::fixture::{BenchDb, BenchStream, LEASE, fill};
use crate::harness::machine::CpuTimes;
use crate::harness::report::thousands;

/// Pending rows drained per measurement.
pub(crate) const ROWS: u64 = 200_000;
/// Rows per claim.
pub(crate) const BATCH: u32 = 500;

/// The naive loop's rates, in rows per second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NaiveRelay {
    /// One loop.
    pub(crate) one: f64,
    /// Two loops side by side on one table.
    pub(crate) two: f64,
}

pub(crate) async fn run() -> Result<NaiveRelay, BoxError> {
    println!(
        "== naive relay loop: drain {} pending rows, claim {BATCH} → publish all → await acks → complete ==",
        thousands(ROWS as f64)
    );
    let one = measure(1, ROWS).await?;
    let two = measure(2, ROWS).await?;
    Ok(NaiveRelay { one, two })
}

/// Drains a fresh backlog of `rows` with `loops` loops; returns rows per
/// second.
pub(crate) async fn measure(loops: usize, rows: u64) -> Result<f64, BoxError> {
    let bench = BenchDb::create().await?;
    let stream = BenchStream::create().await?;
    fill(&bench, &stream.prefix, rows).await?;
    let db = bench.connect(4).await?;
    let store = SeaOrmOutboxStore::new(db.clone(), OutboxConfig::default());
    let publisher = JetStreamPublisher::new(stream.client.clone(), "/txoutbox-bench");
    let cpu = CpuTimes::now();
    let started = Instant::now();
    let drained = join_all((0..loops).map(|_| relay(&store, &publisher))).await;
    let elapsed = started.elapsed();
    let cpu = CpuTimes::now().since(&cpu);
    let mut total = 0;
    for rows in drained {
        total += rows?;
    }
    if total != rows {
        return Err(format!("the naive loop published {total} of {rows} rows").into());
    }
    let rate = total as f64 / elapsed.as_secs_f64();
    println!(
        "{loops} loop(s), batch {BATCH}: {:>8} rows/s in {:.1} s   ({cpu})",
        thousands(rate),
        elapsed.as_secs_f64()
    );
    db.close().await?;
    stream.delete().await?;
    drop(bench);
    Ok(rate)
}

/// One naive loop until a claim comes back empty; returns rows published.
async fn relay(store: &SeaOrmOutboxStore, publisher: &JetStreamPublisher) -> Result<u64, BoxError> {
    let mut published = 0;
    loop {
        let batch = store.claim(BATCH, LEASE).await?;
        if batch.messages.is_empty() {
            return Ok(published);
        }
        let acks = join_all(batch.messages.iter().map(|c| publisher.publish(&c.message))).await;
        let mut done = Vec::with_capacity(acks.len());
        for (claimed, ack) in batch.messages.iter().zip(acks) {
            done.push(Published {
                id: claimed.message.id,
                stream_sequence: ack?.stream_sequence,
            });
        }
        let outcome = store.complete(batch.lease.token, &done).await?;
        published += outcome.applied;
    }
}
