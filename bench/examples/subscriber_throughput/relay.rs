//! A consumer that is also a producer, with the processor in the same
//! process (issue 31, item 4): each handler updates the read model and
//! records a follow-up event in its message's unit of work; a processor
//! (default settings) in the same runtime publishes the follow-ups. Per
//! message, batched and with a batch handler (one `UPDATE` per batch, a
//! follow-up per message), it prints how long the consumer took, when the
//! last follow-up was published, and how many write transactions
//! PostgreSQL ran per event in all (the inbox's and the processor's: its
//! claims and completions; counted by transaction ids, the server's whole,
//! so run it alone), so that one side starving the other, or the
//! processor's completions no longer batched, shows.

use std::time::{Duration, Instant};

use async_nats::jetstream::Context;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use txoutbox_core::{Delivery, HandlerError};
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::inbox::{Batched, InboxBatchHandler};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, UnitOfWork, create_schema};

use crate::paths::{Transactions, batches, reset_read_model, set_update, update_of};
use crate::stream::{create, holding, publish, settled};
use crate::{Result, Step};

/// Runs both ways on `count` messages over `aggregates`; prints a line each.
pub(crate) async fn measure(
    js: &Context,
    db: &DatabaseConnection,
    tag: &str,
    count: u64,
) -> Result {
    let aggregates = 10_000;
    println!(
        "\nconsumer and processor in one process: {count} messages over {aggregates} aggregates, \
         each handler an UPDATE of the read model and a follow-up event"
    );
    println!(
        "{:<30} {:>16} {:>22} {:>22}",
        "path", "consumed (msg/s)", "follow-ups published", "write txns per event"
    );
    for transactions in Transactions::ALL {
        let (consumed, published, transactions_taken) =
            one_way(js, db, tag, (count, aggregates), transactions).await?;
        println!(
            "{:<30} {:>16.0} {:>20.3} s {:>22.2}",
            transactions.name(),
            count as f64 / consumed.as_secs_f64(),
            published.as_secs_f64(),
            transactions_taken as f64 / count as f64
        );
    }
    Ok(())
}

/// One way: the consumer's time, the time until the last follow-up was
/// published (both from the start), and the write transactions taken meanwhile.
async fn one_way(
    js: &Context,
    db: &DatabaseConnection,
    tag: &str,
    (count, aggregates): (u64, u64),
    transactions: Transactions,
) -> Result<(Duration, Duration, i64)> {
    let way = format!("{transactions:?}").to_lowercase();
    let (incoming, incoming_prefix) = (format!("TPUT_{tag}_IN_{way}"), format!("tput{tag}in{way}"));
    let (follow_ups, follow_up_prefix) = (
        format!("TPUT_{tag}_OUT_{way}"),
        format!("tput{tag}out{way}"),
    );
    create(js, &incoming, &incoming_prefix).await?;
    create(js, &follow_ups, &follow_up_prefix).await?;
    let measured = async {
        publish(js, &incoming_prefix, count, aggregates).await?;
        reset_read_model(db, aggregates).await?;
        let config = OutboxConfig::default()
            .with_table(format!("relay_{way}_{tag}"))?
            .with_subject_prefix(&follow_up_prefix)?;
        create_schema(db, &config).await?;
        let outbox = Outbox::new(db.clone(), config);
        let durable = format!("relay_{way}");
        let inbox = Inbox::new(&outbox, &durable)?;
        let handler =
            inbox.handler_boxed(|step: Step, delivery: Delivery, uow: &mut UnitOfWork| {
                Box::pin(async move {
                    uow.connection()
                        .await?
                        .execute_raw(update_of(&delivery))
                        .await?;
                    uow.enqueue(&Step { n: step.n })?;
                    Ok::<(), HandlerError>(())
                })
            });
        let builder = txoutbox_nats::Subscriber::builder(js.clone(), &durable)
            .stream(&incoming)
            .dead_letter(txoutbox_nats::subscriber::DeadLetterPolicy::terminate());
        let builder = match transactions {
            Transactions::PerMessage => builder.on(handler).max_in_flight(64).inbox_per_message(),
            Transactions::Batched => builder
                .on(handler)
                .max_in_flight(256)
                .inbox_groups(batches()),
            Transactions::BatchHandler => builder
                .on(inbox.batch_handler_with(Relay))
                .max_in_flight(256)
                .inbox_groups(batches()),
        };
        let first_id = next_transaction_id(db).await?;
        let processor = outbox
            .processor(JetStreamPublisher::new(js.client(), "/bench"))
            .build()?;
        let started = Instant::now();
        let publishing = processor.spawn();
        let consuming = builder.build().await?.spawn();
        settled(js, &incoming, &durable).await?;
        let consumed = started.elapsed();
        holding(js, &follow_ups, count).await?;
        let published = started.elapsed();
        consuming.shutdown().await?;
        publishing.shutdown().await?;
        let written = next_transaction_id(db).await? - first_id;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((consumed, published, written))
    }
    .await;
    js.delete_stream(&incoming).await?;
    js.delete_stream(&follow_ups).await?;
    measured
}

/// The batch handler of the relay: one set-based `UPDATE` for the batch,
/// then each message's follow-up event, stamped with its own context.
struct Relay;

impl InboxBatchHandler<Step> for Relay {
    async fn handle_batch(
        &self,
        batch: Vec<Batched<Step>>,
        uow: &mut UnitOfWork,
    ) -> std::result::Result<(), HandlerError> {
        uow.connection()
            .await?
            .execute_raw(set_update(&batch))
            .await?;
        for message in batch {
            uow.set_context(message.delivery.caused_context());
            uow.enqueue(&Step { n: message.event.n })?;
        }
        Ok(())
    }
}

/// The next transaction id of the server: what write transactions
/// (committed or not, of every database) have taken so far. Read without
/// taking one.
async fn next_transaction_id(db: &DatabaseConnection) -> Result<i64> {
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT txid_snapshot_xmax(txid_current_snapshot()) AS next",
        ))
        .await?
        .ok_or("no snapshot")?;
    Ok(row.try_get::<i64>("", "next")?)
}
