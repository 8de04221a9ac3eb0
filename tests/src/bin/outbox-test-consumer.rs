//! A consumer as a process of its own, for the consumer crash test
//! (`tests/tests/consumer_crash_order.rs`): a durable subscriber whose
//! inbox handlers apply each order event as a row of `effects` (in the
//! inbox's transaction), in the order they run.
//!
//! ```text
//! outbox-test-consumer --database-url URL [--schema NAME] --nats URL \
//!     --subject-prefix PREFIX --stream NAME --durable NAME --ack-wait-ms N [--ordered] \
//!     [--only-amended]
//! ```
//!
//! `--ordered` turns on `order_across_restarts` with the inbox;
//! `--only-amended` handles `OrderAmended` only (`OrderPlaced` is acked
//! unhandled: a handler with gaps in each aggregate's sequences). Prints
//! `started` once the subscriber runs; runs until killed or its standard
//! input closes.

use std::time::Duration;

use outbox_core::{Delivery, HandlerError};
use outbox_nats::Subscriber;
use outbox_sea_orm::{Inbox, UnitOfWork};
use outbox_tests::orders::{OrderAmended, OrderPlaced};
use outbox_tests::process::{child_outbox, until_stdin_closes};
use sea_orm::ConnectionTrait;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Default)]
struct Args {
    database_url: String,
    schema: Option<String>,
    nats: String,
    subject_prefix: String,
    stream: String,
    durable: String,
    ack_wait: Duration,
    ordered: bool,
    only_amended: bool,
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
            "--stream" => args.stream = value()?,
            "--durable" => args.durable = value()?,
            "--ack-wait-ms" => {
                let ms = value()?
                    .parse()
                    .map_err(|e| format!("--ack-wait-ms: {e}"))?;
                args.ack_wait = Duration::from_millis(ms);
            }
            "--ordered" => args.ordered = true,
            "--only-amended" => args.only_amended = true,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(args)
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
    let args = parse()?;
    let outbox = child_outbox(
        &args.database_url,
        args.schema.as_deref(),
        &args.subject_prefix,
    )
    .await?;
    let inbox = Inbox::new(&outbox, args.durable.clone())?;
    let client = async_nats::connect(&args.nats).await?;
    let mut builder = Subscriber::builder(async_nats::jetstream::new(client), &args.durable)
        .stream(&args.stream)
        .ack_wait(args.ack_wait)
        .on(inbox.handler(|_: OrderAmended, delivery, uow| {
            Box::pin(async move { apply(uow, &delivery).await })
        }));
    builder = if args.only_amended {
        builder.ignore_unhandled()
    } else {
        builder.on(inbox.handler(|_: OrderPlaced, delivery, uow| {
            Box::pin(async move { apply(uow, &delivery).await })
        }))
    };
    if args.ordered {
        builder = builder.order_across_restarts(inbox.clone());
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
