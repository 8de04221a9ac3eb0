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
//!
//! For the endurance part: `--url URL` reaches the database by URL
//! (PostgreSQL with `--schema`, or MariaDB); `--handler batch` applies each
//! inbox group with one batch handler (`Inbox::batch_handler_with`: one
//! `UPDATE` of the [`READ_MODEL_TABLE`] rows of the batch's aggregates),
//! `--handler each` with a handler per message (one `UPDATE` each), instead
//! of the soak's `effects` rows; `--retention-secs N` keeps inbox rows N s
//! (its cleanup); and each `mark` line is answered with `applied <messages
//! so far> <since the last mark> <p50 µs> <p99 µs> <in use> <free kept>`:
//! the percentiles of the time from each event's `occurred_at` (recorded
//! just before its save) to its handler, since the last mark (1%-wide
//! buckets: measuring allocates nothing per message), and the bytes glibc's
//! malloc has in use and keeps freed (`harness::malloc_stats`), to set
//! beside its RSS.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sea_orm::ConnectionTrait;
use tokio::io::AsyncBufReadExt;
use txoutbox_core::cleanup::Cleanup;
use txoutbox_core::tokio_util::sync::CancellationToken;
use txoutbox_core::{Delivery, HandlerError};
use txoutbox_nats::{StreamSpec, Subscriber};
use txoutbox_sea_orm::inbox::{Batched, InboxBatchHandler};
use txoutbox_sea_orm::{Inbox, Outbox, UnitOfWork};

use crate::children::protocol;
use crate::harness::error::BoxError;
use crate::harness::fixture::{self, BenchEvent, connect_child};
use crate::harness::log_histogram::LogHistogram;
use crate::harness::malloc_stats;

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

/// The endurance part's read model, created (and filled with a row per
/// aggregate) by the parent: how many events of each aggregate were
/// applied.
pub(crate) const READ_MODEL_TABLE: &str =
    "CREATE TABLE read_model (id varchar(64) PRIMARY KEY, n bigint NOT NULL DEFAULT 0)";

/// What the handler writes for each event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    /// A row of `effects` per event (the soak's check reads them).
    Effects,
    /// A batch handler: one `UPDATE` of `read_model` per batch.
    Batch,
    /// A handler per message: one `UPDATE` of `read_model` each.
    Each,
}

/// Runs the child with `args` (what follows the part's name).
pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let value = |flag: &str| fixture::flag_value(args, PART, flag);
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let write = match value("--handler") {
        Err(_) | Ok("effects") => Write::Effects,
        Ok("batch") => Write::Batch,
        Ok("each") => Write::Each,
        Ok(other) => return Err(format!("{PART}: unknown --handler `{other}`").into()),
    };
    let db = connect_child(args, PART, 8).await?;
    let outbox = Outbox::new(db, fixture::config(value("--prefix")?)?);
    let inbox = Inbox::new(&outbox, DURABLE)?;
    let client = fixture::reconnecting_client(value("--nats")?).await?;
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
    let duplicates = move || duplicates_of(&metrics.render());
    let applied = Applied::default();
    let builder = Subscriber::builder(async_nats::jetstream::new(client), DURABLE)
        .stream(value("--stream")?)
        .dead_letter_stream(StreamSpec::dead_letters())
        .ack_wait(ACK_WAIT);
    let builder = match value("--retention-secs") {
        Ok(secs) => builder.cleanup(Cleanup::keep_for(Duration::from_secs(secs.parse()?))),
        Err(_) => builder,
    };
    let builder = match write {
        Write::Effects => builder.on(inbox.handler_boxed(
            |_: BenchEvent, delivery: Delivery, uow: &mut UnitOfWork| {
                Box::pin(async move { apply(uow, &delivery).await })
            },
        )),
        Write::Batch => builder.on(inbox.batch_handler_with(ReadModel(applied.clone()))),
        Write::Each => {
            let applied = applied.clone();
            builder.on(inbox.handler_boxed(
                move |_: BenchEvent, delivery: Delivery, uow: &mut UnitOfWork| {
                    let applied = applied.clone();
                    Box::pin(async move {
                        let id = delivery.aggregate_id();
                        update_read_model(uow, &format!("id = '{id}'")).await?;
                        applied.record(&delivery);
                        Ok::<(), HandlerError>(())
                    })
                },
            ))
        }
    };
    let subscriber = builder.build().await?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(subscriber.run(shutdown.clone()));
    protocol::ready()?;
    let progress = tokio::spawn(protocol::print_count("dups", duplicates.clone()));
    let mut input = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = input.next_line().await? {
        if line.trim() == "mark" {
            protocol::say(&applied.mark())?;
        }
    }
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

/// Messages applied by the read-model handlers, and the time from each
/// event's `occurred_at` to its handler since the last mark. Cheap to
/// clone.
#[derive(Debug, Clone, Default)]
struct Applied {
    total: Arc<AtomicU64>,
    /// Microseconds, since the last mark.
    latencies: Arc<LogHistogram>,
}

impl Applied {
    fn record(&self, delivery: &Delivery) {
        let age = chrono::Utc::now() - delivery.message().occurred_at;
        let micros = u64::try_from(age.num_microseconds().unwrap_or(0)).unwrap_or(0);
        self.total.fetch_add(1, Ordering::Relaxed);
        self.latencies.record(micros);
    }

    /// `applied <total> <since the last mark> <p50 µs> <p99 µs> <malloc
    /// bytes in use> <malloc bytes freed and kept>`, starting a new window.
    fn mark(&self) -> String {
        let window = self.latencies.take();
        let malloc = malloc_stats::now();
        format!(
            "applied {} {} {} {} {} {}",
            self.total.load(Ordering::Relaxed),
            window.count(),
            window.percentile(0.5),
            window.percentile(0.99),
            malloc.map_or(0, |m| m.in_use),
            malloc.map_or(0, |m| m.free_kept)
        )
    }
}

/// The batch handler: one `UPDATE` of the read model for a whole batch
/// (each aggregate at most once in it).
struct ReadModel(Applied);

impl InboxBatchHandler<BenchEvent> for ReadModel {
    async fn handle_batch(
        &self,
        batch: Vec<Batched<BenchEvent>>,
        uow: &mut UnitOfWork,
    ) -> Result<(), HandlerError> {
        let ids: Vec<String> = batch
            .iter()
            .map(|message| format!("'{}'", message.delivery.aggregate_id()))
            .collect();
        update_read_model(uow, &format!("id IN ({})", ids.join(","))).await?;
        for message in &batch {
            self.0.record(&message.delivery);
        }
        Ok(())
    }
}

/// Adds one to the read model's rows matching `filter` (the bench's own
/// aggregate ids, quoted), in the inbox's transaction.
async fn update_read_model(uow: &mut UnitOfWork, filter: &str) -> Result<(), HandlerError> {
    uow.connection()
        .await?
        .execute_unprepared(&format!("UPDATE read_model SET n = n + 1 WHERE {filter}"))
        .await?;
    Ok(())
}
