//! The throughput of each path on one shape: raw pull, typed, inbox per
//! message, inbox batched (a handler per message, or a batch handler with
//! one set-based statement per batch); the handlers with a no-op write and
//! with an `UPDATE` of the aggregate's read-model row.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream::Context;
use async_nats::jetstream::consumer::{AckPolicy, pull};
use futures::StreamExt;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use txoutbox_core::{Delivery, HandlerError};
use txoutbox_nats::subscriber::{DeadLetterPolicy, InboxGroups, Subscriber, SubscriberBuilder};
use txoutbox_sea_orm::inbox::{Batched, InboxBatchHandler};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, UnitOfWork, create_schema};

use crate::stream::{create, publish, settled};
use crate::{Result, Step};

/// What a handler writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    /// Nothing.
    Nothing,
    /// `UPDATE read_model SET n = n + 1 WHERE id = <aggregate>`.
    ReadModel,
}

/// How the inbox applies its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transactions {
    /// One per message (`inbox_per_message`).
    PerMessage,
    /// In groups (`inbox_groups`).
    Batched,
    /// In groups, with a batch handler (`Inbox::batch_handler_with`): one
    /// set-based statement for each batch.
    BatchHandler,
}

impl Transactions {
    /// Every way, in the order printed.
    pub(crate) const ALL: [Self; 3] = [Self::PerMessage, Self::Batched, Self::BatchHandler];

    /// The way's name in the bench's tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::PerMessage => "inbox per message",
            Self::Batched => "inbox batched",
            Self::BatchHandler => "inbox batched, batch handler",
        }
    }
}

/// Time the inbox handlers spent in their read-model `UPDATE`s (on the
/// connection of their transaction, already held), in nanoseconds, to
/// tell where a path's time goes.
pub(crate) static UPDATE_NANOS: AtomicU64 = AtomicU64::new(0);

/// The inbox groups the batched paths use: the defaults, or
/// `INBOX_BATCH_TRANSACTIONS` groups at once.
pub(crate) fn batches() -> InboxGroups {
    let defaults = InboxGroups::default();
    match std::env::var("INBOX_BATCH_TRANSACTIONS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        Some(transactions) => defaults.transactions(transactions),
        None => defaults,
    }
}

/// Runs the read model's `update` on `db`, timed.
async fn timed_update(
    db: &impl ConnectionTrait,
    update: Statement,
) -> std::result::Result<(), sea_orm::DbErr> {
    let started = Instant::now();
    db.execute_raw(update).await?;
    let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    UPDATE_NANOS.fetch_add(nanos, Ordering::Relaxed);
    Ok(())
}

/// The read model's update for `delivery`'s aggregate.
pub(crate) fn update_of(delivery: &Delivery) -> Statement {
    Statement::from_sql_and_values(
        DbBackend::Postgres,
        "UPDATE read_model SET n = n + 1 WHERE id = $1",
        [delivery.aggregate_id().into()],
    )
}

/// The inbox handler of `write`.
pub(crate) fn inbox_handler(
    inbox: &Inbox,
    write: Write,
) -> impl txoutbox_core::consumer::Handler<Step> + use<> {
    inbox.handler_boxed(move |_: Step, delivery: Delivery, uow: &mut UnitOfWork| {
        Box::pin(async move {
            if write == Write::ReadModel {
                timed_update(uow.connection().await?, update_of(&delivery)).await?;
            }
            Ok::<(), HandlerError>(())
        })
    })
}

/// The inbox batch handler of `write`.
pub(crate) fn batch_handler(
    inbox: &Inbox,
    write: Write,
) -> impl txoutbox_core::consumer::Handler<Step> + use<> {
    inbox.batch_handler_with(SetUpdate(write))
}

/// The batch handler of `write`: one `UPDATE ... FROM UNNEST(..)` for a
/// whole batch (each aggregate at most once in it).
struct SetUpdate(Write);

impl InboxBatchHandler<Step> for SetUpdate {
    async fn handle_batch(
        &self,
        batch: Vec<Batched<Step>>,
        uow: &mut UnitOfWork,
    ) -> std::result::Result<(), HandlerError> {
        if self.0 == Write::ReadModel {
            timed_update(uow.connection().await?, set_update(&batch)).await?;
        }
        Ok(())
    }
}

/// The read model's update for every aggregate of `batch` (each at most
/// once in it), in one statement.
pub(crate) fn set_update(batch: &[Batched<Step>]) -> Statement {
    let ids: Vec<String> = batch
        .iter()
        .map(|message| message.delivery.aggregate_id().to_owned())
        .collect();
    Statement::from_sql_and_values(
        DbBackend::Postgres,
        "UPDATE read_model AS r SET n = r.n + 1 FROM UNNEST($1::text[]) AS b(id) \
         WHERE r.id = b.id",
        [ids.into()],
    )
}

/// A read model with one row per aggregate, at zero.
pub(crate) async fn reset_read_model(db: &DatabaseConnection, aggregates: u64) -> Result {
    db.execute_unprepared(
        "CREATE TABLE IF NOT EXISTS read_model (id VARCHAR(32) PRIMARY KEY, n BIGINT NOT NULL)",
    )
    .await?;
    db.execute_unprepared("TRUNCATE read_model").await?;
    db.execute_unprepared(&format!(
        "INSERT INTO read_model (id, n) SELECT 'a' || g, 0 FROM generate_series(0, {}) g",
        aggregates - 1
    ))
    .await?;
    Ok(())
}

/// The sum of the read model's counts.
pub(crate) async fn read_model_total(db: &DatabaseConnection) -> Result<i64> {
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT COALESCE(SUM(n), 0)::BIGINT AS n FROM read_model",
        ))
        .await?
        .ok_or("no sum")?;
    Ok(row.try_get::<i64>("", "n")?)
}

/// Measures every path on `count` messages over `aggregates` aggregates;
/// prints one line per path, with its rate as a multiple of the producer's
/// drain rate (`producer_rate`, events/s).
pub(crate) async fn measure(
    js: &Context,
    db: &DatabaseConnection,
    tag: &str,
    (count, aggregates): (u64, u64),
    producer_rate: f64,
) -> Result {
    let (stream, prefix) = (
        format!("TPUT_{tag}_{aggregates}"),
        format!("tput{tag}x{aggregates}"),
    );
    create(js, &stream, &prefix).await?;
    let measured = async {
        publish(js, &prefix, count, aggregates).await?;
        let config = OutboxConfig::default().without_notify();
        create_schema(db, &config).await?;
        let outbox = Outbox::new(db.clone(), config);
        println!("\n{aggregates} aggregates");
        println!(
            "{:<56} {:>9} {:>12} {:>11}",
            "path", "seconds", "messages/s", "x producer"
        );
        let report = |name: &str, elapsed: Duration| {
            let rate = count as f64 / elapsed.as_secs_f64();
            println!(
                "{name:<56} {:>9.3} {rate:>12.0} {:>11.2}",
                elapsed.as_secs_f64(),
                rate / producer_rate
            );
            let updates = Duration::from_nanos(UPDATE_NANOS.swap(0, Ordering::Relaxed));
            if !updates.is_zero() {
                println!(
                    "  of which in the handlers' UPDATEs: {:.3} s (summed over transactions), {:.1} us each",
                    updates.as_secs_f64(),
                    updates.as_secs_f64() * 1e6 / count as f64
                );
            }
        };
        report(
            "raw pull consumer (fetch + ack)",
            raw(js, &stream, count).await?,
        );
        for write in [Write::Nothing, Write::ReadModel] {
            reset_read_model(db, aggregates).await?;
            let elapsed = typed(js, db, &stream, write).await?;
            report(&format!("typed subscriber, {}", label(write)), elapsed);
        }
        for transactions in Transactions::ALL {
            for write in [Write::Nothing, Write::ReadModel] {
                reset_read_model(db, aggregates).await?;
                let elapsed = inbox(
                    js,
                    db,
                    &outbox,
                    &stream,
                    (count, aggregates),
                    transactions,
                    write,
                )
                .await?;
                report(&format!("{}, {}", transactions.name(), label(write)), elapsed);
            }
        }
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    js.delete_stream(&stream).await?;
    measured
}

fn label(write: Write) -> &'static str {
    match write {
        Write::Nothing => "no-op write",
        Write::ReadModel => "UPDATE of the read model",
    }
}

/// The raw pull consumer: fetch and ack, nothing else.
async fn raw(js: &Context, stream: &str, count: u64) -> Result<Duration> {
    let consumer = js
        .get_stream(stream)
        .await?
        .create_consumer(pull::Config {
            durable_name: Some("raw".into()),
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        })
        .await?;
    let started = Instant::now();
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(256)
        .messages()
        .await?;
    for _ in 0..count {
        let message = messages.next().await.ok_or("stream ended")??;
        message.ack().await?;
    }
    settled(js, stream, "raw").await?;
    Ok(started.elapsed())
}

/// The subscriber builder every path shares.
fn builder(js: &Context, stream: &str, durable: &str) -> SubscriberBuilder {
    Subscriber::builder(js.clone(), durable)
        .stream(stream)
        // Nothing fails here; no dead-letter stream to litter the server with.
        .dead_letter(DeadLetterPolicy::terminate())
        .max_in_flight(256)
}

/// A typed subscriber with a plain handler (effects at least once).
async fn typed(
    js: &Context,
    db: &DatabaseConnection,
    stream: &str,
    write: Write,
) -> Result<Duration> {
    let durable = format!("typed_{}", write == Write::ReadModel);
    let db = db.clone();
    let started = Instant::now();
    let running = builder(js, stream, &durable)
        .on(move |_: Step, delivery: Delivery| {
            let db = db.clone();
            async move {
                if write == Write::ReadModel {
                    db.execute_raw(update_of(&delivery)).await?;
                }
                Ok::<(), HandlerError>(())
            }
        })
        .unordered()
        .build()
        .await?
        .spawn();
    settled(js, stream, &durable).await?;
    let elapsed = started.elapsed();
    running.shutdown().await?;
    Ok(elapsed)
}

/// An inbox subscriber; checks that every message was applied once.
pub(crate) async fn inbox(
    js: &Context,
    db: &DatabaseConnection,
    outbox: &Outbox,
    stream: &str,
    (count, aggregates): (u64, u64),
    transactions: Transactions,
    write: Write,
) -> Result<Duration> {
    let durable = format!("inbox_{transactions:?}_{write:?}_{aggregates}").to_lowercase();
    let inbox = Inbox::new(outbox, &durable)?;
    let builder = builder(js, stream, &durable);
    let builder = match transactions {
        Transactions::PerMessage => builder
            .on(inbox_handler(&inbox, write))
            .max_in_flight(64)
            .inbox_per_message(),
        Transactions::Batched => builder
            .on(inbox_handler(&inbox, write))
            .inbox_groups(batches()),
        Transactions::BatchHandler => builder
            .on(batch_handler(&inbox, write))
            .inbox_groups(batches()),
    };
    let started = Instant::now();
    let running = builder.build().await?.spawn();
    settled(js, stream, &durable).await?;
    let elapsed = started.elapsed();
    running.shutdown().await?;
    let recorded = db
        .query_one_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT COUNT(*) AS n FROM outbox_inbox WHERE consumer = $1",
            [durable.clone().into()],
        ))
        .await?
        .ok_or("no count")?
        .try_get::<i64>("", "n")?;
    if u64::try_from(recorded)? != count {
        return Err(format!("{durable}: the inbox holds {recorded} rows, not {count}").into());
    }
    if write == Write::ReadModel {
        let total = read_model_total(db).await?;
        if u64::try_from(total)? != count {
            return Err(format!("{durable}: the read model counts {total}, not {count}").into());
        }
    }
    Ok(elapsed)
}
