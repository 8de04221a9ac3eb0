//! `txoutbox-bench soak-subscriber --schema S --prefix P --nats URL --stream
//! NAME`: the soak's consumer in a process of its own, modelled on the
//! tests' `outbox-test-consumer`. A durable subscriber (`soak`) with an
//! inbox and `keep_order` applies every [`BenchEvent`] as one row of
//! `effects` (aggregate, sequence, message id) in the inbox's transaction.
//! Prints `ready` once it runs and `dups <n>` whenever the count of
//! deliveries the inbox absorbed as duplicates changed (checked every
//! 250 ms), so a parent learns it even if it SIGKILLs the process; stops
//! when its standard input closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sea_orm::ConnectionTrait;
use tokio::io::AsyncBufReadExt;
use txoutbox_core::tokio_util::sync::CancellationToken;
use txoutbox_core::{Delivery, HandlerError};
use txoutbox_nats::{StreamSpec, Subscriber};
use txoutbox_sea_orm::inbox::Processed;
use txoutbox_sea_orm::{Inbox, Outbox, UnitOfWork};

use crate::children::protocol;
use crate::harness::error::BoxError;
use crate::harness::fixture::{self, BenchEvent, connect_schema};

/// The part's name on the command line.
pub(crate) const PART: &str = "soak-subscriber";

/// The durable consumer's (and the inbox's) name.
pub(crate) const DURABLE: &str = "soak";

/// How long JetStream waits for a dead process's messages.
const ACK_WAIT: Duration = Duration::from_secs(5);

/// The table of effects, created by the parent.
pub(crate) const EFFECTS_TABLE: &str = "CREATE TABLE effects (id bigserial PRIMARY KEY, \
     aggregate_id text NOT NULL, sequence bigint NOT NULL, message_id uuid NOT NULL)";

/// Runs the child with `args` (what follows the part's name).
pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let value = |flag: &str| fixture::flag_value(args, PART, flag);
    let db = connect_schema(value("--schema")?, 8).await?;
    let outbox = Outbox::new(db, fixture::config(value("--prefix")?)?);
    let inbox = Inbox::new(&outbox, DURABLE)?;
    let client = fixture::reconnecting_client(value("--nats")?).await?;
    let duplicates = Arc::new(AtomicU64::new(0));
    let handler = {
        let (inbox, duplicates) = (inbox.clone(), duplicates.clone());
        move |event: BenchEvent, delivery: Delivery| {
            let (inbox, duplicates) = (inbox.clone(), duplicates.clone());
            async move {
                let done = inbox
                    .process(event, delivery, |_, delivery, uow| {
                        Box::pin(async move { apply(uow, &delivery).await })
                    })
                    .await?;
                if done == Processed::Duplicate {
                    duplicates.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }
        }
    };
    let subscriber = Subscriber::builder(async_nats::jetstream::new(client), DURABLE)
        .stream(value("--stream")?)
        .dead_letter_stream(StreamSpec::dead_letters())
        .ack_wait(ACK_WAIT)
        .keep_order(inbox)
        .on(handler)
        .build()
        .await?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(subscriber.run(shutdown.clone()));
    protocol::ready()?;
    let progress = {
        let duplicates = duplicates.clone();
        tokio::spawn(protocol::print_count("dups", move || {
            duplicates.load(Ordering::Relaxed)
        }))
    };
    let mut input = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while input.next_line().await?.is_some() {}
    shutdown.cancel();
    running.await??;
    progress.abort();
    println!("dups {}", duplicates.load(Ordering::Relaxed));
    Ok(())
}

/// The effect of one event: a row of `effects`, in the inbox's transaction.
async fn apply(uow: &mut UnitOfWork, delivery: &Delivery) -> Result<(), HandlerError> {
    let message = delivery.message();
    uow.connection()
        .await?
        .execute_unprepared(&format!(
            "INSERT INTO effects (aggregate_id, sequence, message_id) VALUES ('{}', {}, '{}')",
            message.aggregate_id, message.sequence, message.id
        ))
        .await?;
    Ok(())
}
