//! A consumer as a process of its own, for the consumer crash tests
//! (`tests/tests/consume/consumer_crash_order.rs`,
//! `tests/tests/consume/consumer_partitions.rs`): a durable subscriber whose
//! inbox handlers apply each order event as a row of `effects` (in the
//! inbox's transaction), in the order they run.
//!
//! ```text
//! outbox-test-consumer --database-url URL [--schema NAME] --nats URL \
//!     --subject-prefix PREFIX --stream NAME --durable NAME [--ack-wait-ms N] [--unordered] \
//!     [--only-amended] [--partitions N --own K,K,..] [--failover] [--inbox-per-message] [--label NAME]
//!     [--start-at-ms UNIX_MS] [--locked-effects] [--fail AGGREGATE:SEQUENCE:UNTIL_UNIX_MS]
//!     [--max-deliver N] [--backoff-ms N] [--reader-lease-ms N] \
//!     [--filter-subject SUBJECT] [--max-ack-pending N]
//! ```
//!
//! The subscriber is wired the default way (inbox handlers, no order-specific
//! call), so it keeps order; without `--ack-wait-ms` it has the library's
//! default ack wait; `--unordered` turns that off (`unordered()`);
//! `--only-amended` handles `OrderAmended` only (`OrderPlaced` is acked
//! unhandled: a handler with gaps in each aggregate's sequences);
//! `--partitions N --own 0,3` consumes only partitions 0 and 3 of a stream
//! split into N under the subject prefix, and records the `--own` text in
//! the effect's `process` column. `--failover` runs it in failover mode
//! (`failover()`: any number of processes on the durable, one pinned);
//! `--inbox-per-message` applies each message in a transaction of its own
//! (`inbox_per_message`; inbox groups are the default);
//! `--label NAME` records `NAME` in the `process` column.
//! `--start-at-ms` waits until that wall-clock time (milliseconds since the
//! Unix epoch) before it builds the subscriber (processes started at once),
//! and prints `started` before it waits (a build refused as
//! `DurableInUse` then reports `refused=1` when stopped);
//! `--locked-effects` locks each effect's aggregate in its transaction
//! (`effects::apply_locked`: parallel application shows as disorder);
//! `--fail A:S:T` fails the event of aggregate `A` at sequence `S` (a
//! retryable error) until the wall-clock time `T`; `--max-deliver`,
//! `--backoff-ms` (a fixed backoff) and `--reader-lease-ms` set the
//! subscriber's; `--filter-subject` and `--max-ack-pending` set the
//! builder's `filter_subject` and `max_ack_pending`. Prints
//! `started` once the subscriber runs; runs until killed or its standard
//! input closes.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use txoutbox_core::{Delivery, HandlerError, Partitions};
use txoutbox_nats::async_nats::jetstream::stream::StorageType;
use txoutbox_nats::subscriber::{DeadLetterPolicy, SubscriberBuildError};
use txoutbox_nats::{StreamSpec, Subscriber};
use txoutbox_sea_orm::{Inbox, UnitOfWork};
use txoutbox_suite::orders::{OrderAmended, OrderPlaced};
use txoutbox_suite::process::dead_letter_stream;
use txoutbox_suite::process::{ChildArgs, number, until_stdin_closes};

/// The consumer's own arguments.
#[derive(Debug, Default)]
struct Args {
    stream: String,
    durable: String,
    ack_wait: Option<Duration>,
    unordered: bool,
    only_amended: bool,
    inbox_per_message: bool,
    partitions: Option<u32>,
    own: Option<String>,
    failover: bool,
    label: Option<String>,
    filter_subject: Option<String>,
    max_ack_pending: Option<usize>,
    start_at: Option<u64>,
    locked_effects: bool,
    fail: Option<Failing>,
    max_deliver: Option<u64>,
    backoff: Option<Duration>,
    reader_lease: Option<Duration>,
}

/// `--fail`: an event whose handler fails until a wall-clock time.
#[derive(Debug, Clone)]
struct Failing {
    aggregate: String,
    sequence: u64,
    until_ms: u64,
}

impl Failing {
    fn parse(text: &str) -> Result<Self, String> {
        let mut parts = text.rsplitn(3, ':');
        let (Some(until), Some(sequence), Some(aggregate)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("--fail {text}: AGGREGATE:SEQUENCE:UNTIL_UNIX_MS"));
        };
        Ok(Self {
            aggregate: aggregate.to_owned(),
            sequence: number("--fail", sequence)?,
            until_ms: number("--fail", until)?,
        })
    }

    /// Whether `delivery`'s event fails now.
    fn fails(&self, delivery: &Delivery) -> bool {
        let message = delivery.message();
        message.aggregate_id == self.aggregate
            && message.sequence == self.sequence
            && unix_ms() < self.until_ms
    }
}

/// Milliseconds since the Unix epoch, by the wall clock.
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

fn parse() -> Result<(ChildArgs, Args), String> {
    let mut args = Args::default();
    let common = ChildArgs::parse(|flag, value| {
        match flag {
            "--stream" => args.stream = value()?,
            "--durable" => args.durable = value()?,
            "--ack-wait-ms" => {
                args.ack_wait = Some(Duration::from_millis(number(flag, &value()?)?));
            }
            "--unordered" => args.unordered = true,
            "--only-amended" => args.only_amended = true,
            "--inbox-per-message" => args.inbox_per_message = true,
            "--partitions" => args.partitions = Some(number(flag, &value()?)?),
            "--own" => args.own = Some(value()?),
            "--failover" => args.failover = true,
            "--label" => args.label = Some(value()?),
            "--filter-subject" => args.filter_subject = Some(value()?),
            "--max-ack-pending" => args.max_ack_pending = Some(number(flag, &value()?)?),
            "--start-at-ms" => args.start_at = Some(number(flag, &value()?)?),
            "--locked-effects" => args.locked_effects = true,
            "--fail" => args.fail = Some(Failing::parse(&value()?)?),
            "--max-deliver" => args.max_deliver = Some(number(flag, &value()?)?),
            "--backoff-ms" => {
                args.backoff = Some(Duration::from_millis(number(flag, &value()?)?));
            }
            "--reader-lease-ms" => {
                args.reader_lease = Some(Duration::from_millis(number(flag, &value()?)?));
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if args.partitions.is_some() != args.own.is_some() {
        return Err("--partitions and --own go together".to_owned());
    }
    Ok((common, args))
}

/// The partitions of `--own`: `0,3,6`.
fn owned(own: &str) -> Result<Vec<u16>, String> {
    own.split(',').map(|k| number("--own", k.trim())).collect()
}

/// Applies one event of `aggregate` at `sequence`: a row of `effects`,
/// naming the partitions this process owns (`process`) when it owns some.
async fn apply(uow: &mut UnitOfWork, delivery: &Delivery, how: &How) -> Result<(), HandlerError> {
    // Some work, so that many messages are in flight when the process dies.
    tokio::time::sleep(Duration::from_millis(2)).await;
    if how.fail.as_ref().is_some_and(|fail| fail.fails(delivery)) {
        return Err(HandlerError::retry("failing on purpose (--fail)"));
    }
    if how.locked {
        txoutbox_suite::effects::apply_locked(uow, delivery, how.process).await
    } else {
        txoutbox_suite::effects::apply_as(uow, delivery, how.process).await
    }
}

/// How the handlers apply an event.
struct How {
    process: Option<&'static str>,
    locked: bool,
    fail: Option<Failing>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (common, args) = parse()?;
    // Logs on standard error (the test's), with `RUST_LOG` set.
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let outbox = common.outbox().await?;
    let inbox = Inbox::new(&outbox, args.durable.clone())?;
    // `--nats` may name every node of a cluster, comma-separated.
    let servers = common
        .nats
        .split(',')
        .map(str::parse::<async_nats::ServerAddr>)
        .collect::<Result<Vec<_>, _>>()?;
    let client = async_nats::connect(servers).await?;
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
    // Leaked: the handlers outlive `main`'s borrows (it is one string).
    let process: Option<&'static str> = args
        .label
        .clone()
        .or_else(|| args.own.clone())
        .map(|process| &*process.leak());
    let how: &'static How = Box::leak(Box::new(How {
        process,
        locked: args.locked_effects,
        fail: args.fail.clone(),
    }));
    let mut builder = Subscriber::builder(async_nats::jetstream::new(client), &args.durable)
        .stream(&args.stream)
        .dead_letter(DeadLetterPolicy::publish_to(dead_letter_subject))
        .dead_letter_stream(dead_letters)
        .on(inbox.handler_boxed(move |_: OrderAmended, delivery, uow| {
            Box::pin(async move { apply(uow, &delivery, how).await })
        }));
    // With --only-amended, OrderPlaced is unhandled: acked and counted.
    if !args.only_amended {
        builder = builder.on(inbox.handler_boxed(move |_: OrderPlaced, delivery, uow| {
            Box::pin(async move { apply(uow, &delivery, how).await })
        }));
    }
    if let (Some(count), Some(own)) = (args.partitions, &args.own) {
        builder = builder.partitions(&common.subject_prefix, Partitions::new(count)?, owned(own)?);
    }
    if let Some(ack_wait) = args.ack_wait {
        builder = builder.ack_wait(ack_wait);
    }
    if let Some(subject) = &args.filter_subject {
        builder = builder.filter_subject(subject);
    }
    if let Some(max) = args.max_ack_pending {
        builder = builder.max_ack_pending(max);
    }
    if args.unordered {
        builder = builder.unordered();
    }
    if args.failover {
        builder = builder.failover();
    }
    if args.inbox_per_message {
        builder = builder.inbox_per_message();
    }
    if let Some(max) = args.max_deliver {
        builder = builder.max_deliver(max);
    }
    if let Some(delay) = args.backoff {
        builder = builder.backoff(txoutbox_nats::subscriber::Backoff::fixed(delay));
    }
    if let Some(lease) = args.reader_lease {
        builder = builder.reader_lease(lease);
    }
    if let Some(at) = args.start_at {
        // Started: the test starts the next process while this one waits.
        println!("started");
        tokio::time::sleep(Duration::from_millis(at.saturating_sub(unix_ms()))).await;
    }
    // Its message, not its Debug form, on standard error.
    let subscriber = match builder.build().await {
        Ok(subscriber) => subscriber,
        // Started at a set time, the process said `started` already: a
        // refusal is its report.
        Err(err @ SubscriberBuildError::DurableInUse { .. }) if args.start_at.is_some() => {
            eprintln!("{}", txoutbox_core::ErrorChain(&err));
            until_stdin_closes().await?;
            println!("report refused=1");
            return Ok(());
        }
        Err(err) => return Err(txoutbox_core::ErrorChain(&err).to_string().into()),
    };
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(subscriber.run(shutdown.clone()));
    if args.start_at.is_none() {
        println!("started");
    }
    until_stdin_closes().await?;
    shutdown.cancel();
    running.await??;
    println!("report stopped=1");
    Ok(())
}
