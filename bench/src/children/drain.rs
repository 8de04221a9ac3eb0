//! `txoutbox-bench drain-child --schema S --prefix P --rows N --batch B
//! --batches F --max M --sample-ms T`: one processor draining a filled
//! backlog in a process of its own, so its memory is the processor's alone.
//!
//! The processor is wired like `Outbox::processor` (commit listener +
//! `LISTEN`) but with a [`CountingStore`](crate::harness::record::CountingStore). The drain is timed from spawn until
//! the store completed N rows. It prints `ready` once its processors are
//! built, `drained` when the rows are, then the figures, one per line (see
//! [`Output`]), for the `drain` parts (`parts/drain.rs`) to read.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use txoutbox_core::processor::ProcessorReport;
use txoutbox_core::publisher::PublishAck;
use txoutbox_core::{OutboxMessage, PublishError, Publisher};
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::{Outbox, Retention};

use crate::children::protocol;
use crate::harness::error::BoxError;
use crate::harness::fixture::{self, connect_schema};
use crate::harness::machine;
use crate::harness::memory::{self, Sampler};
use crate::harness::pgstats::StatementLog;
use crate::harness::record::{OpFigures, StoreCounts, counted_processor};

/// The part's name on the command line.
pub(crate) const PART: &str = "drain-child";

/// Connections of the processor's pool.
const POOL: u32 = 10;
/// Longest a drain may take.
const TIMEOUT: Duration = Duration::from_secs(900);

/// The processor settings a drain runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) batch_size: u32,
    pub(crate) batches_in_flight: usize,
    pub(crate) max_in_flight: usize,
    /// `Retention::Delete` instead of the default `KeepPublished`.
    pub(crate) delete_published: bool,
    /// Processors side by side in the one process (1 but in `drain-tune`).
    pub(crate) processors: usize,
    /// Every publish acked at once without a broker ([`InstantAcks`]): the
    /// drain with publishing free, to tell its database share (`ingest`).
    pub(crate) instant_acks: bool,
}

impl Default for Settings {
    /// The processor's defaults.
    fn default() -> Self {
        let defaults = txoutbox_core::processor::ProcessorConfig::default();
        Self {
            batch_size: defaults.batch_size(),
            batches_in_flight: defaults.batches_in_flight(),
            max_in_flight: defaults.max_in_flight(),
            delete_published: false,
            processors: 1,
            instant_acks: false,
        }
    }
}

impl std::fmt::Display for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "batch {:>4}, {} in flight, max_in_flight {:>4}",
            self.batch_size, self.batches_in_flight, self.max_in_flight
        )?;
        if self.delete_published {
            write!(f, ", Retention::Delete")?;
        }
        if self.processors > 1 {
            write!(f, ", {} processors", self.processors)?;
        }
        if self.instant_acks {
            write!(f, ", acks at once (no broker)")?;
        }
        Ok(())
    }
}

/// What the child measured.
#[derive(Debug, Default)]
pub(crate) struct Output {
    pub(crate) elapsed: Duration,
    pub(crate) report: ProcessorReport,
    pub(crate) ops: Vec<OpFigures>,
    /// Prepared statements by kind: (kind, count, summed time).
    pub(crate) statements: Vec<(String, u64, Duration)>,
    /// `VmRSS` when the processor was spawned, KiB.
    pub(crate) rss_before: u64,
    /// `VmHWM` at the end, KiB: the process's peak.
    pub(crate) peak: u64,
    /// (time since spawn, `VmRSS` KiB).
    pub(crate) samples: Vec<(Duration, u64)>,
    /// CPU seconds the process used while draining.
    pub(crate) cpu_seconds: f64,
    /// Mean ordinary-claim time in each tenth of the claims, in order.
    pub(crate) claim_deciles: Vec<Duration>,
}

/// The child's command-line arguments for a drain.
pub(crate) fn args(
    schema: &str,
    prefix: &str,
    rows: u64,
    settings: Settings,
    sample_every: Duration,
) -> Vec<String> {
    [
        PART,
        "--schema",
        schema,
        "--prefix",
        prefix,
        "--rows",
        &rows.to_string(),
        "--batch",
        &settings.batch_size.to_string(),
        "--batches",
        &settings.batches_in_flight.to_string(),
        "--max",
        &settings.max_in_flight.to_string(),
        "--sample-ms",
        &sample_every.as_millis().to_string(),
        "--processors",
        &settings.processors.to_string(),
        "--retention",
        if settings.delete_published {
            "delete"
        } else {
            "keep"
        },
        "--acks",
        if settings.instant_acks {
            "instant"
        } else {
            "broker"
        },
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// Runs the child with `args` (what follows the part's name).
pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let value = |flag: &str| fixture::flag_value(args, PART, flag);
    let (schema, prefix) = (value("--schema")?, value("--prefix")?);
    let rows: u64 = value("--rows")?.parse()?;
    let settings = Settings {
        batch_size: value("--batch")?.parse()?,
        batches_in_flight: value("--batches")?.parse()?,
        max_in_flight: value("--max")?.parse()?,
        delete_published: value("--retention")? == "delete",
        processors: value("--processors")?.parse()?,
        instant_acks: value("--acks")? == "instant",
    };
    let sample_every = Duration::from_millis(value("--sample-ms")?.parse()?);

    let mut db = connect_schema(schema, POOL).await?;
    let log = StatementLog::install(&mut db);
    let mut config = fixture::config(prefix)?;
    if settings.delete_published {
        config = config.with_retention(Retention::Delete);
    }
    let outbox = Outbox::new(db.clone(), config);
    let counts = Arc::new(StoreCounts::default());
    let client = fixture::connect(&fixture::nats_url()).await?;
    let mut processors = Vec::new();
    for _ in 0..settings.processors.max(1) {
        let publisher = if settings.instant_acks {
            DrainPublisher::Instant(InstantAcks)
        } else {
            DrainPublisher::JetStream(Box::new(JetStreamPublisher::new(
                client.clone(),
                "/txoutbox-bench",
            )))
        };
        let builder = counted_processor(&outbox, publisher, Arc::clone(&counts));
        processors.push(
            builder
                .batch_size(settings.batch_size)
                .batches_in_flight(settings.batches_in_flight)
                .max_in_flight(settings.max_in_flight)
                .build()?,
        );
    }

    protocol::ready()?;
    let rss_before = memory::now()?.rss_kib;
    let cpu_before = machine::own_cpu_seconds();
    let sampler = Sampler::start(sample_every);
    let started = Instant::now();
    let handles: Vec<_> = processors.into_iter().map(|p| p.spawn()).collect();
    while counts.complete.rows() < rows {
        if handles.iter().any(|h| h.is_finished()) {
            return Err("the processor stopped before the backlog was drained".into());
        }
        if started.elapsed() > TIMEOUT {
            return Err(format!(
                "drained only {} of {rows} rows in {TIMEOUT:?}",
                counts.complete.rows()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = started.elapsed();
    let cpu_seconds = machine::own_cpu_seconds() - cpu_before;
    {
        // Tells the parent to read CPU times while this process and its
        // database backends still exist.
        let mut out = std::io::stdout().lock();
        writeln!(out, "drained")?;
        out.flush()?;
    }
    let samples = sampler.stop().await?;
    let mut report = ProcessorReport::default();
    for handle in handles {
        let one = handle.shutdown().await?;
        report.batches += one.batches;
        report.published += one.published;
        report.failed += one.failed;
        report.dead += one.dead;
        report.released += one.released;
    }
    let peak = memory::now()?.peak_kib;
    drop(outbox);
    // Closing the pool ends its backends, which flushes their counters.
    db.close().await?;

    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    writeln!(out, "elapsed_us {}", elapsed.as_micros())?;
    writeln!(
        out,
        "report {} {} {} {} {}",
        report.batches, report.published, report.failed, report.dead, report.released
    )?;
    for op in counts.snapshot() {
        writeln!(
            out,
            "op {} {} {} {}",
            op.name,
            op.calls,
            op.rows,
            op.total.as_micros()
        )?;
    }
    for (kind, (count, time)) in log.snapshot() {
        writeln!(out, "stmt {count} {} {kind}", time.as_micros())?;
    }
    let deciles: Vec<String> = counts
        .claim_deciles()
        .iter()
        .map(|d| d.as_micros().to_string())
        .collect();
    writeln!(out, "claim_deciles_us {}", deciles.join(" "))?;
    writeln!(out, "memory {rss_before} {peak}")?;
    writeln!(out, "cpu_ms {}", (cpu_seconds * 1e3).round() as u64)?;
    for (at, kib) in samples {
        writeln!(out, "sample {} {kib}", at.as_millis())?;
    }
    writeln!(out, "done")?;
    out.flush()?;
    Ok(())
}

/// Reads what [`run`] printed.
pub(crate) fn parse(text: &str) -> Result<Output, BoxError> {
    let mut output = Output::default();
    let mut done = false;
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let number = |i: usize| -> Result<u64, BoxError> {
            Ok(fields
                .get(i)
                .ok_or_else(|| format!("short line from the drain child: {line:?}"))?
                .parse()?)
        };
        match fields.first().copied() {
            Some("elapsed_us") => output.elapsed = Duration::from_micros(number(1)?),
            Some("report") => {
                let mut report = ProcessorReport::default();
                report.batches = number(1)?;
                report.published = number(2)?;
                report.failed = number(3)?;
                report.dead = number(4)?;
                report.released = number(5)?;
                output.report = report;
            }
            Some("op") => output.ops.push(OpFigures {
                name: fields.get(1).copied().unwrap_or("?").to_owned(),
                calls: number(2)?,
                rows: number(3)?,
                total: Duration::from_micros(number(4)?),
            }),
            Some("stmt") => output.statements.push((
                fields
                    .get(3..)
                    .map(|kind| kind.join(" "))
                    .unwrap_or_default(),
                number(1)?,
                Duration::from_micros(number(2)?),
            )),
            Some("memory") => {
                output.rss_before = number(1)?;
                output.peak = number(2)?;
            }
            Some("claim_deciles_us") => {
                output.claim_deciles = fields[1..]
                    .iter()
                    .map(|us| us.parse().map(Duration::from_micros))
                    .collect::<Result<_, _>>()?;
            }
            Some("cpu_ms") => output.cpu_seconds = number(1)? as f64 / 1e3,
            Some("sample") => output
                .samples
                .push((Duration::from_millis(number(1)?), number(2)?)),
            Some("done") => done = true,
            Some("drained") => {}
            _ => return Err(format!("unexpected line from the drain child: {line:?}").into()),
        }
    }
    if !done {
        return Err("the drain child did not finish its report".into());
    }
    Ok(output)
}

/// A publisher that acks every message at once and sends nothing: a drain
/// through it costs only the database and the processor, so comparing it
/// with a real drain tells how much of the drain's time publishing takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InstantAcks;

impl Publisher for InstantAcks {
    async fn publish(&self, _message: &OutboxMessage) -> Result<PublishAck, PublishError> {
        Ok(PublishAck::default())
    }
}

/// The drain child's publisher: JetStream, or [`InstantAcks`].
#[derive(Debug, Clone)]
enum DrainPublisher {
    JetStream(Box<JetStreamPublisher>),
    Instant(InstantAcks),
}

impl Publisher for DrainPublisher {
    async fn publish(&self, message: &OutboxMessage) -> Result<PublishAck, PublishError> {
        match self {
            Self::JetStream(publisher) => publisher.publish(message).await,
            Self::Instant(publisher) => publisher.publish(message).await,
        }
    }

    async fn publish_run(&self, run: &[&OutboxMessage]) -> Vec<Result<PublishAck, PublishError>> {
        match self {
            Self::JetStream(publisher) => publisher.publish_run(run).await,
            Self::Instant(publisher) => publisher.publish_run(run).await,
        }
    }

    fn is_available(&self) -> bool {
        match self {
            Self::JetStream(publisher) => publisher.is_available(),
            Self::Instant(publisher) => publisher.is_available(),
        }
    }

    fn ack_timeout(&self) -> Option<Duration> {
        match self {
            Self::JetStream(publisher) => publisher.ack_timeout(),
            Self::Instant(publisher) => publisher.ack_timeout(),
        }
    }
}
