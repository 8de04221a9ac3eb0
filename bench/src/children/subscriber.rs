//! `txoutbox-bench soak-subscriber --schema S --prefix P --nats URL --stream
//! NAME`: the soak's consumer in a process of its own, modelled on the
//! tests' `outbox-test-consumer`. A durable subscriber (`soak`) with the
//! library's defaults (order kept, inbox groups) and an inbox handler
//! applies every [`BenchEvent`] as one row of `effects` (aggregate,
//! sequence, message id) in the inbox's transaction, in groups of messages.
//! Prints `ready` once it runs and `dups <n>` whenever the count of
//! deliveries the inbox absorbed as duplicates changed (its
//! `outbox_inbox_messages_total{outcome="duplicate"}`, checked every
//! 250 ms), so a parent learns it even if it SIGKILLs the process; stops
//! when its standard input closes. With `RUST_LOG` set it logs to stderr
//! (the parent's), e.g. `RUST_LOG=txoutbox_nats=info`.

use std::time::Duration;

use sea_orm::ConnectionTrait;
use tokio::io::AsyncBufReadExt;
use txoutbox_core::tokio_util::sync::CancellationToken;
use txoutbox_core::{Delivery, HandlerError};
use txoutbox_nats::{StreamSpec, Subscriber};
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

/// The table of effects, created by the parent; `applied_at` is when the
/// inbox's transaction wrote the row (the database's clock).
pub(crate) const EFFECTS_TABLE: &str = "CREATE TABLE effects (id bigserial PRIMARY KEY, \
     aggregate_id text NOT NULL, sequence bigint NOT NULL, message_id uuid NOT NULL, \
     applied_at timestamptz NOT NULL DEFAULT clock_timestamp())";

/// Runs the child with `args` (what follows the part's name).
pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let value = |flag: &str| fixture::flag_value(args, PART, flag);
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let db = connect_schema(value("--schema")?, 8).await?;
    let outbox = Outbox::new(db, fixture::config(value("--prefix")?)?);
    let inbox = Inbox::new(&outbox, DURABLE)?;
    let client = fixture::reconnecting_client(value("--nats")?).await?;
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
    let duplicates = move || duplicates_of(&metrics.render());
    let handler = inbox.handler_boxed(|_: BenchEvent, delivery: Delivery, uow: &mut UnitOfWork| {
        Box::pin(async move { apply(uow, &delivery).await })
    });
    let subscriber = Subscriber::builder(async_nats::jetstream::new(client), DURABLE)
        .stream(value("--stream")?)
        .dead_letter_stream(StreamSpec::dead_letters())
        .ack_wait(ACK_WAIT)
        .on(handler)
        .build()
        .await?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(subscriber.run(shutdown.clone()));
    protocol::ready()?;
    let progress = tokio::spawn(protocol::print_count("dups", duplicates.clone()));
    let mut input = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while input.next_line().await?.is_some() {}
    shutdown.cancel();
    running.await??;
    progress.abort();
    println!("dups {}", duplicates());
    Ok(())
}

/// The deliveries the inbox found applied before, from the rendered
/// metrics (`outbox_inbox_messages_total{..,outcome="duplicate"} N`).
fn duplicates_of(rendered: &str) -> u64 {
    rendered
        .lines()
        .filter(|line| {
            line.starts_with("outbox_inbox_messages_total")
                && line.contains("outcome=\"duplicate\"")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|count| count as u64)
        .sum()
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
