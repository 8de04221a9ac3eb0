//! An outbox processor as a process of its own, for the crash test
//! (`tests/tests/processor/processor_crash.rs`): it runs `Outbox::processor` with the
//! JetStream publisher until its standard input closes (then it shuts down
//! gracefully and prints its report) or it is killed.
//!
//! ```text
//! outbox-test-processor --database-url URL [--schema NAME] --nats URL \
//!     --subject-prefix PREFIX [--lease-ms N] [--batch-size N] \
//!     [--write-orders N --write-tag TAG] [--die-on AGGREGATE_ID:SEQUENCE]
//! ```
//!
//! With `--die-on`, the process aborts (as a panic under `panic = "abort"`
//! or an out-of-memory kill would end it) when it is about to publish that
//! message: a message that kills every processor handling it.
//!
//! With `--write-orders`, the process also writes N orders of 5 events
//! (`TAG-0`, `TAG-1`, ...), one unit of work each, one after another, so
//! its processor is handed them leased at commit: a writer and its
//! processor in one process, to be killed together.
//!
//! `--schema` sets the PostgreSQL `search_path`, as the tests' isolated
//! databases need. Prints `started` once the processor runs, and
//! `report published=N batches=N failed=N dead=N released=N` at the end.

use std::time::Duration;

use txoutbox_core::publisher::PublishAck;
use txoutbox_core::{OutboxMessage, PublishError, Publisher};
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::Outbox;
use txoutbox_suite::orders::Order;
use txoutbox_suite::process::{ChildArgs, number, until_stdin_closes};

/// The processor's own arguments.
#[derive(Debug, Default)]
struct Args {
    lease: Option<Duration>,
    batch_size: Option<u32>,
    write_orders: usize,
    write_tag: String,
    die_on: Option<(String, u64)>,
}

fn parse() -> Result<(ChildArgs, Args), String> {
    let mut args = Args::default();
    let common = ChildArgs::parse(|flag, value| {
        match flag {
            "--lease-ms" => args.lease = Some(Duration::from_millis(number(flag, &value()?)?)),
            "--batch-size" => args.batch_size = Some(number(flag, &value()?)?),
            "--write-orders" => args.write_orders = number(flag, &value()?)?,
            "--write-tag" => args.write_tag = value()?,
            "--die-on" => {
                let spec = value()?;
                let (id, sequence) = spec
                    .rsplit_once(':')
                    .ok_or("--die-on: AGGREGATE_ID:SEQUENCE")?;
                args.die_on = Some((id.to_owned(), number(flag, sequence)?));
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok((common, args))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (common, args) = parse()?;
    let outbox = common.outbox().await?;
    let client = async_nats::connect(&common.nats).await?;
    let mut publisher = JetStreamPublisher::new(client, "/outbox-test-processor");
    if let Some(lease) = args.lease {
        // The processor needs a lease of at least five ack timeouts.
        publisher = publisher.with_ack_timeout(lease / 5);
    }
    let publisher = Killable {
        inner: publisher,
        die_on: args.die_on.clone(),
    };
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
    until_stdin_closes().await?;
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

/// The JetStream publisher, aborting the process on one message.
struct Killable {
    inner: JetStreamPublisher,
    die_on: Option<(String, u64)>,
}

impl Killable {
    fn check(&self, message: &OutboxMessage) {
        if let Some((id, sequence)) = &self.die_on
            && message.aggregate_id == *id
            && message.sequence == *sequence
        {
            eprintln!("aborting on {id}:{sequence}");
            std::process::abort();
        }
    }
}

impl Publisher for Killable {
    async fn publish(&self, message: &OutboxMessage) -> Result<PublishAck, PublishError> {
        self.check(message);
        self.inner.publish(message).await
    }

    async fn publish_run(&self, run: &[&OutboxMessage]) -> Vec<Result<PublishAck, PublishError>> {
        for message in run {
            self.check(message);
        }
        self.inner.publish_run(run).await
    }

    fn is_available(&self) -> bool {
        self.inner.is_available()
    }

    fn ack_timeout(&self) -> Option<Duration> {
        self.inner.ack_timeout()
    }
}
