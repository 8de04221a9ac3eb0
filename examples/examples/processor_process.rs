//! Step 3: run the processor as its own process.
//!
//! `cargo run -p txoutbox-examples --example processor_process` (until Ctrl-C)
//! `cargo run -p txoutbox-examples --example processor_process -- --until-idle`
//!
//! The services write outbox rows (e.g. `enqueue_in_transaction`); this
//! process publishes them to JetStream. It is the same call as the
//! in-process processor: with no commits of its own to listen to, it is
//! woken by PostgreSQL `NOTIFY`s, or polls (every second by default).

use std::error::Error;
use std::time::Duration;

use txoutbox::OutboxConfig;
use txoutbox::store::OutboxStore;
use txoutbox::{JetStreamPublisher, StreamSpec};
use txoutbox_examples::support::{self, Nats};

const LEASE: Duration = txoutbox::processor::DEFAULT_LEASE;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    txoutbox_examples::support::exit_on_help(include_str!("processor_process.rs"));
    support::init_logging();
    let until_idle = std::env::args().any(|arg| arg == "--until-idle");

    // The database the services write to, and a NATS server.
    let url = support::database_url("outbox-examples");
    let config = OutboxConfig::default().with_subject_prefix(support::EXAMPLE_PREFIX)?;
    let outbox = support::open_outbox(&url, config).await?;
    let nats = Nats::find_or_start()?;
    let client = nats.connect().await?;

    // The stream must capture the subjects before anything is published;
    // its duplicate window (2 min) must outlast the processor's lease.
    let jetstream = async_nats::jetstream::new(client.clone());
    StreamSpec::new(
        support::EXAMPLE_STREAM,
        [format!("{}.>", support::EXAMPLE_PREFIX)],
    )
    .processor_lease(LEASE)
    .ensure(&jetstream)
    .await?;

    // The processor: claims batches under a lease, publishes with the
    // message id as `Nats-Msg-Id`, marks rows published after the ack.
    let processor = outbox
        .processor(JetStreamPublisher::new(client, "/processor-example"))
        .lease(LEASE)
        .build()?
        .spawn();
    println!(
        "publishing to stream {} via {}; Ctrl-C stops",
        support::EXAMPLE_STREAM,
        nats.url
    );

    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = tick.tick() => {}
        }
        let stats = outbox.store().stats().await?;
        // Past 10,000 pending messages the count is an estimate.
        let about = if stats.pending_is_estimate { "~" } else { "" };
        println!(
            "pending {about}{:>4} | dead {:>3}",
            stats.pending, stats.dead
        );
        if until_idle && stats.pending == 0 {
            break;
        }
    }

    // Graceful stop: waits for acks in flight, gives back unpublished claims.
    let report = processor.shutdown().await?;
    println!("stopped: {report:?}");
    Ok(())
}
