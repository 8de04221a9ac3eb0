//! One shape again and again: "inbox batched, no-op write" on 10,000
//! aggregates (the default inbox groups), each run on a fresh stream and
//! durable, to find and show a rare stall. Prints each run's seconds and
//! the machine's load before it; with `RUST_LOG` (e.g.
//! `RUST_LOG=txoutbox_nats=debug`) the subscriber's logs go to standard
//! error.

use sea_orm::{ConnectionTrait, DatabaseConnection};
use txoutbox_sea_orm::{Outbox, OutboxConfig, create_schema};

use crate::Result;
use crate::paths::{Transactions, Write, inbox, reset_read_model};
use crate::stream::{create, publish};

/// The aggregates the messages spread over.
const AGGREGATES: u64 = 10_000;

/// Runs the shape `runs` times on `count` messages; returns the slowest
/// run's seconds.
pub(crate) async fn measure(
    js: &async_nats::jetstream::Context,
    db: &DatabaseConnection,
    tag: &str,
    count: u64,
    runs: u32,
) -> Result<f64> {
    let config = OutboxConfig::default().without_notify();
    create_schema(db, &config).await?;
    let outbox = Outbox::new(db.clone(), config);
    let mut slowest: f64 = 0.0;
    println!("inbox batched, no-op write, {count} messages over {AGGREGATES} aggregates");
    for run in 1..=runs {
        let (stream, prefix) = (format!("TPUT_{tag}_r{run}"), format!("tput{tag}r{run}"));
        create(js, &stream, &prefix).await?;
        let measured = async {
            publish(js, &prefix, count, AGGREGATES).await?;
            reset_read_model(db, AGGREGATES).await?;
            // The durable's name is the same every run: its inbox starts empty.
            db.execute_unprepared("TRUNCATE outbox_inbox").await?;
            let load = load_average();
            let elapsed = inbox(
                js,
                db,
                &outbox,
                &stream,
                (count, AGGREGATES),
                Transactions::Batched,
                Write::Nothing,
            )
            .await?;
            println!(
                "run {run:>2}: {:.3} s ({:.0} msg/s), load {load}",
                elapsed.as_secs_f64(),
                count as f64 / elapsed.as_secs_f64()
            );
            Ok::<f64, Box<dyn std::error::Error + Send + Sync>>(elapsed.as_secs_f64())
        }
        .await;
        js.delete_stream(&stream).await?;
        slowest = slowest.max(measured?);
    }
    println!("slowest of {runs}: {slowest:.3} s");
    Ok(slowest)
}

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`), or `?`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "?".to_owned())
}
