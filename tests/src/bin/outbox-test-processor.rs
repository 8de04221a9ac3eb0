//! An outbox processor as a process of its own, for the crash test
//! (`tests/tests/processor_crash.rs`): it runs `Outbox::processor` with the
//! JetStream publisher until its standard input closes (then it shuts down
//! gracefully and prints its report) or it is killed.
//!
//! ```text
//! outbox-test-processor --database-url URL [--schema NAME] --nats URL \
//!     --subject-prefix PREFIX [--lease-ms N] [--batch-size N] \
//!     [--write-orders N --write-tag TAG]
//! ```
//!
//! With `--write-orders`, the process also writes N orders of 5 events
//! (`TAG-0`, `TAG-1`, ...), one unit of work each, one after another, so
//! its processor is handed them leased at commit: a writer and its
//! processor in one process, to be killed together.
//!
//! `--schema` sets the PostgreSQL `search_path`, as the tests' isolated
//! databases need. Prints `started` once the processor runs, and
//! `report published=N batches=N failed=N dead=N released=N` at the end.

use std::io::BufRead;
use std::time::Duration;

use outbox_nats::JetStreamPublisher;
use outbox_sea_orm::{Outbox, OutboxConfig};
use outbox_tests::orders::Order;
use sea_orm::{ConnectOptions, Database};

#[derive(Debug, Default)]
struct Args {
    database_url: String,
    schema: Option<String>,
    nats: String,
    subject_prefix: String,
    lease: Option<Duration>,
    batch_size: Option<u32>,
    write_orders: usize,
    write_tag: String,
}

fn parse() -> Result<Args, String> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--database-url" => args.database_url = value()?,
            "--schema" => args.schema = Some(value()?),
            "--nats" => args.nats = value()?,
            "--subject-prefix" => args.subject_prefix = value()?,
            "--lease-ms" => {
                let ms = value()?.parse().map_err(|e| format!("--lease-ms: {e}"))?;
                args.lease = Some(Duration::from_millis(ms));
            }
            "--batch-size" => {
                args.batch_size = Some(value()?.parse().map_err(|e| format!("--batch-size: {e}"))?);
            }
            "--write-orders" => {
                args.write_orders = value()?
                    .parse()
                    .map_err(|e| format!("--write-orders: {e}"))?;
            }
            "--write-tag" => args.write_tag = value()?,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if args.database_url.is_empty() || args.nats.is_empty() || args.subject_prefix.is_empty() {
        return Err("--database-url, --nats and --subject-prefix are required".to_owned());
    }
    Ok(args)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse()?;
    let mut options = ConnectOptions::new(&args.database_url);
    if let Some(schema) = &args.schema {
        options.set_schema_search_path(schema.clone());
    }
    options.max_connections(10).sqlx_logging(false);
    let db = Database::connect(options).await?;
    let outbox = Outbox::new(
        db,
        OutboxConfig::default().with_subject_prefix(&args.subject_prefix)?,
    );
    let client = async_nats::connect(&args.nats).await?;
    let mut publisher = JetStreamPublisher::new(client, "/outbox-test-processor");
    if let Some(lease) = args.lease {
        // The processor needs a lease of at least five ack timeouts.
        publisher = publisher.ack_timeout(lease / 5);
    }
    let mut builder = outbox.processor(publisher);
    if let Some(lease) = args.lease {
        builder = builder.lease(lease);
    }
    if let Some(size) = args.batch_size {
        builder = builder.batch_size(size);
    }
    let processor = builder.build()?.spawn();
    println!("started");
    if args.write_orders > 0 {
        tokio::spawn(write(outbox.clone(), args.write_orders, args.write_tag));
    }

    // Run until standard input closes (or the process is killed).
    tokio::task::spawn_blocking(|| {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            if line.is_err() {
                break;
            }
        }
    })
    .await?;
    let report = processor.shutdown().await?;
    println!(
        "report published={} batches={} failed={} dead={} released={}",
        report.published, report.batches, report.failed, report.dead, report.released
    );
    Ok(())
}

/// Writes `orders` orders of 5 events, one unit of work each.
async fn write(outbox: Outbox, orders: usize, tag: String) {
    for n in 0..orders {
        let mut order = Order::place(format!("{tag}-{n}"), 100).expect("record");
        for k in 1..5 {
            order.amend(100 + k).expect("record");
        }
        if let Err(err) = outbox.repository::<Order>().save(&mut order).await {
            eprintln!("writing {tag}-{n} failed: {err}");
        }
    }
}
