//! Step 4: subscribe with typed handlers.
//!
//! `cargo run -p txoutbox-examples --example subscribe` (until Ctrl-C)
//! `cargo run -p txoutbox-examples --example subscribe -- --for 5` (5 seconds)
//!
//! Consumes what `enqueue_in_transaction` wrote and `processor_process`
//! published. Each handler gets the decoded Rust type (older versions are
//! upcast first) and the delivery; `Ok` acks, an error retries with
//! backoff, a permanent error or the last delivery dead-letters.

use std::error::Error;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use txoutbox::nats::subscriber::Backoff;
use txoutbox::{Delivery, HandlerError, IntegrationEvent};
use txoutbox::{StreamSpec, Subscriber};
use txoutbox_examples::support::{self, Nats};

/// The consumer's own copy of the event's type: same name, same shape.
#[derive(Debug, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "user.registered")]
struct UserRegistered {
    email: String,
}

async fn welcome(event: UserRegistered, delivery: Delivery) -> Result<(), HandlerError> {
    if !event.email.contains('@') {
        // Retrying will not help: straight to the dead-letter subject.
        return Err(HandlerError::permanent(format!(
            "bad email {:?}",
            event.email
        )));
    }
    println!(
        "welcome mail to {} (message {}, delivery #{}, correlation {})",
        event.email,
        delivery.message_id(),
        delivery.delivery_count(),
        delivery.correlation_id()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    txoutbox_examples::support::exit_on_help(include_str!("subscribe.rs"));
    support::init_logging();
    let args: Vec<String> = std::env::args().collect();
    let run_for = match args.iter().position(|a| a == "--for") {
        Some(i) => Some(Duration::from_secs(
            args.get(i + 1).ok_or("--for SECS")?.parse()?,
        )),
        None => None,
    };

    let nats = Nats::find_or_start()?;
    let jetstream = async_nats::jetstream::new(nats.connect().await?);
    StreamSpec::new(
        support::EXAMPLE_STREAM,
        [format!("{}.>", support::EXAMPLE_PREFIX)],
    )
    .ensure(&jetstream)
    .await?;

    // A durable pull consumer: it remembers where it is between runs.
    let running = Subscriber::builder(jetstream, "example-welcome-mails")
        .stream(support::EXAMPLE_STREAM)
        .filter_subject(format!("{}.user.>", support::EXAMPLE_PREFIX))
        .max_deliver(5)
        .backoff(Backoff::exponential(
            Duration::from_millis(200),
            Duration::from_secs(5),
        ))
        // Dead letters go to `dlq.example-welcome-mails` (`dlq.<durable>`);
        // a stream must keep them: the README's `DLQ` (`dlq.>`), created if
        // missing, which every consumer shares.
        .dead_letter_stream(StreamSpec::dead_letters())
        .on(welcome)
        // A mail is sent, not written to a database: no inbox to apply it
        // once, so it runs at least once, in order within this process.
        .unordered()
        .build()
        .await?
        .spawn();
    println!(
        "subscribed to {}.user.>; Ctrl-C stops",
        support::EXAMPLE_PREFIX
    );

    match run_for {
        Some(duration) => tokio::time::sleep(duration).await,
        None => tokio::signal::ctrl_c().await?,
    }
    // Stops pulling, lets running handlers finish, naks what is left.
    running.shutdown().await?;
    println!("stopped cleanly");
    Ok(())
}
