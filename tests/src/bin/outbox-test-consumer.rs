//! A consumer as a process of its own, for the consumer crash test
//! (`tests/tests/consume/consumer_crash_order.rs`): a durable subscriber whose
//! inbox handlers apply each order event as a row of `effects` (in the
//! inbox's transaction), in the order they run.
//!
//! ```text
//! outbox-test-consumer --database-url URL [--schema NAME] --nats URL \
//!     --subject-prefix PREFIX --stream NAME --durable NAME --ack-wait-ms N [--ordered] \
//!     [--only-amended]
//! ```
//!
//! `--ordered` turns on `keep_order` with the inbox;
//! `--only-amended` handles `OrderAmended` only (`OrderPlaced` is acked
//! unhandled: a handler with gaps in each aggregate's sequences). Prints
//! `started` once the subscriber runs; runs until killed or its standard
//! input closes.

use std::time::Duration;

use outbox_core::{Delivery, HandlerError};
use outbox_nats::async_nats::jetstream::stream::StorageType;
use outbox_nats::subscriber::DeadLetterPolicy;
use outbox_nats::{StreamSpec, Subscriber};
use outbox_sea_orm::{Inbox, UnitOfWork};
use outbox_tests::orders::{OrderAmended, OrderPlaced};
use outbox_tests::process::dead_letter_stream;
use outbox_tests::process::{ChildArgs, number, until_stdin_closes};
use sea_orm::ConnectionTrait;
use tokio_util::sync::CancellationToken;

/// The consumer's own arguments.
#[derive(Debug, Default)]
struct Args {
    stream: String,
    durable: String,
    ack_wait: Duration,
    ordered: bool,
    only_amended: bool,
}

fn parse() -> Result<(ChildArgs, Args), String> {
    let mut args = Args::default();
    let common = ChildArgs::parse(|flag, value| {
        match flag {
            "--stream" => args.stream = value()?,
            "--durable" => args.durable = value()?,
            "--ack-wait-ms" => args.ack_wait = Duration::from_millis(number(flag, &value()?)?),
            "--ordered" => args.ordered = true,
            "--only-amended" => args.only_amended = true,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok((common, args))
}

/// Applies one event of `aggregate` at `sequence`: a row of `effects`.
async fn apply(uow: &mut UnitOfWork, delivery: &Delivery) -> Result<(), HandlerError> {
    // Some work, so that many messages are in flight when the process dies.
    tokio::time::sleep(Duration::from_millis(2)).await;
    let message = delivery.message();
    uow.connection()
        .await?
        .execute_unprepared(&format!(
            "INSERT INTO effects (aggregate_id, sequence) VALUES ('{}', {})",
            message.aggregate_id, message.sequence
        ))
        .await?;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (common, args) = parse()?;
    let outbox = common.outbox().await?;
    let inbox = Inbox::new(&outbox, args.durable.clone())?;
    let client = async_nats::connect(&common.nats).await?;
    // Dead letters go to a subject and a memory stream of this test's own
    // (by its subject prefix: tests running at once share durable names),
    // which the test deletes.
    let dead_letter_subject = format!("dlq.{}.{}", common.subject_prefix, args.durable);
    let dead_letters = StreamSpec::new(
        dead_letter_stream(&common.subject_prefix),
        [dead_letter_subject.clone()],
    )
    .storage(StorageType::Memory)
    .max_age(Duration::from_secs(600));
    let mut builder = Subscriber::builder(async_nats::jetstream::new(client), &args.durable)
        .stream(&args.stream)
        .dead_letter(DeadLetterPolicy::publish_to(dead_letter_subject))
        .dead_letter_stream(dead_letters)
        .ack_wait(args.ack_wait)
        .on(inbox.handler_boxed(|_: OrderAmended, delivery, uow| {
            Box::pin(async move { apply(uow, &delivery).await })
        }));
    builder = if args.only_amended {
        builder.ignore_unhandled()
    } else {
        builder.on(inbox.handler_boxed(|_: OrderPlaced, delivery, uow| {
            Box::pin(async move { apply(uow, &delivery).await })
        }))
    };
    if args.ordered {
        builder = builder.keep_order(inbox.clone());
    }
    let subscriber = builder.build().await?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(subscriber.run(shutdown.clone()));
    println!("started");
    until_stdin_closes().await?;
    shutdown.cancel();
    running.await??;
    println!("report stopped=1");
    Ok(())
}
