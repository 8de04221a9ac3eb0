//! Step 5: survive a broker outage. Runs by itself in about 15 seconds.
//!
//! `cargo run -p txoutbox-examples --example broker_outage`
//!
//! A private nats-server (its own port and store) is started once to create
//! the stream, then stopped. The service keeps committing orders while the
//! broker is down: the events wait in the outbox table and the backlog
//! grows; no attempt is spent on an unreachable broker. Then the broker
//! comes back and the processor drains the backlog to zero, each message
//! once. Uses a fresh SQLite file, whatever `DATABASE_URL` says.

use std::error::Error;
use std::time::{Duration, Instant};

use txoutbox::MessageContext;

use txoutbox::OutboxConfig;
use txoutbox::store::OutboxStore;
use txoutbox::{JetStreamPublisher, NatsConnect, StreamSpec};
use txoutbox_examples::orders::Order;
use txoutbox_examples::orders_table;
use txoutbox_examples::support::{self, PrivateNats};

const LEASE: Duration = txoutbox::processor::DEFAULT_LEASE;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    txoutbox_examples::support::exit_on_help(include_str!("broker_outage.rs"));
    support::init_logging_at("error"); // the processor warns about the outage; we print it
    let dir = tempfile::tempdir()?;
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("outage.sqlite").display()
    );
    let outbox =
        support::open_outbox(&url, OutboxConfig::default().with_subject_prefix("outage")?).await?;
    orders_table::create_table(outbox.db()).await?;

    // Provisioning (normally at deploy time): the stream exists. Then the broker goes down.
    let mut nats = PrivateNats::new()?;
    nats.start()?;
    let jetstream = async_nats::jetstream::new(async_nats::connect(nats.url()).await?);
    StreamSpec::new("OUTAGE", ["outage.>"])
        .processor_lease(LEASE)
        .ensure(&jetstream)
        .await?;
    nats.stop();
    println!("nats-server on {} is DOWN", nats.url());

    // The service starts anyway: the client keeps trying in the background.
    let client = NatsConnect::new(nats.url())
        .retry_initial_connect()
        .connect()
        .await?;
    let processor = outbox
        .processor(JetStreamPublisher::new(client, "/broker-outage"))
        .lease(LEASE)
        .unavailable_backoff(Duration::from_millis(100), Duration::from_secs(1))
        .build()?
        .spawn();

    // Orders keep coming while the broker is down; the backlog grows.
    let orders = outbox.repository::<Order>();
    let mut written = 0u64;
    for second in 1..=5 {
        for _ in 0..4 {
            let mut order = Order::place(format!("o-{written}"), "ada", 1_000)?;
            order.pay()?;
            let context = MessageContext::new().with_correlation_id(format!("req-{written}"));
            orders.save_with(&mut order, context).await?; // commits; no broker needed
            written += 2;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let pending = outbox.store().stats().await?.pending;
        println!("[{second}s] broker down | events written {written:>3} | backlog {pending:>3}");
    }

    // The broker comes back: the processor drains the backlog.
    nats.start()?;
    println!("nats-server is UP again");
    let started = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pending = outbox.store().stats().await?.pending;
        println!(
            "[+{:.1}s] draining | backlog {pending:>3}",
            started.elapsed().as_secs_f32()
        );
        if pending == 0 {
            break;
        }
        if started.elapsed() > Duration::from_secs(20) {
            return Err(format!("backlog still {pending} after 20 s").into());
        }
    }

    let report = processor.shutdown().await?;
    let jetstream = async_nats::jetstream::new(async_nats::connect(nats.url()).await?);
    let in_stream = jetstream
        .get_stream("OUTAGE")
        .await?
        .info()
        .await?
        .state
        .messages;
    println!(
        "drained: {written} written, {} published, {} failed attempts, {in_stream} in the stream",
        report.published, report.failed
    );
    Ok(())
}
