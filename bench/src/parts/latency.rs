//! Commit-to-ack latency at a steady offered rate: 8 writers offering one-event
//! transactions through the unit of work (an `orders` row and its ~300-byte
//! event), with the processor
//! - in the writers' process (fast path: the ids of just-committed messages
//!   are leased by primary key), or
//! - in another process (this binary as `processor-child`, see [`crate::children::processor`]; woken by
//!   `LISTEN`/`NOTIFY`).
//!
//! Each writer records the wall-clock time right after `commit()` returns,
//! keyed by message id; a publisher decorator records the wall-clock time of
//! each ack. Latency = ack − commit return; an ack that lands before
//! `commit()` returned (possible on the fast path) counts as 0 and is
//! counted. 2 s of warm-up, then 10 s measured.
//!
//! At 5,000/s two baselines come first, with no processor: the same writers
//! sending the unit of work's statement with no outbox code at all (what
//! this machine allows these writers), then the writers through the unit of
//! work alone. The write-rate checks print the first beside their target.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sea_orm::{ConnectionTrait, DbBackend, Statement};
use txoutbox_core::MessageId;
use txoutbox_core::processor::ProcessorReport;
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::Outbox;

use crate::children::processor;
use crate::children::protocol::Proc;
use crate::harness::error::BoxError;
use crate::harness::fixture::{BenchDb, BenchEvent, BenchOrder, BenchStream, config};
use crate::harness::machine::CpuTimes;
use crate::harness::offered;
use crate::harness::pgstats::{self, StatementLog};
use crate::harness::record::{Acks, RecordingPublisher};
use crate::harness::report::{Check, thousands};
use crate::harness::stats::{ms, percentile};

pub(crate) const WRITERS: usize = 8;
const WARMUP: Duration = Duration::from_secs(2);
const RUN: Duration = Duration::from_secs(10);
/// Connections of the writers' pool (the in-process processor shares it).
const POOL: u32 = 16;
/// Longest wait for the last acks after the writers stopped.
const SETTLE: Duration = Duration::from_secs(30);

/// Where the processor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    InProcess,
    OtherProcess,
    /// No processor at all: what the writers achieve alone (a baseline).
    Nowhere,
    /// No processor and no outbox code: each writer sends the statement the
    /// unit of work would send, straight through the pool (the machine's
    /// ceiling for these writers, see [`raw_save`]).
    RawStatement,
}

impl Placement {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Placement::InProcess => "same process (fast path)",
            Placement::OtherProcess => "other process (LISTEN/NOTIFY)",
            Placement::Nowhere => "no processor (writers alone)",
            Placement::RawStatement => "no outbox code (raw statement)",
        }
    }
}

/// What each writer's transactions do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writes {
    /// Place a new order (a fresh aggregate) per transaction.
    PlaceNew,
    /// Load and amend the writer's own order, which already has `history`
    /// published events (and as many outbox rows kept), per transaction.
    Amend { history: u64 },
}

/// One measured case.
pub(crate) struct Case {
    pub(crate) achieved: f64,
    pub(crate) latencies: Vec<Duration>,
    pub(crate) commit_latencies: Vec<Duration>,
    schedule_lags: Vec<Duration>,
    acked_before_commit_returned: usize,
    pub(crate) missing: usize,
    pub(crate) cpu: String,
    /// Batches the processor claimed (non-empty claims) and messages it published.
    batches: u64,
    published: u64,
    /// Statements sent in the measured window through SeaORM, by kind
    /// (`BEGIN`/`COMMIT` and the claims, sent through the sqlx pool, are not
    /// counted).
    statements: Vec<(String, u64)>,
}

pub(crate) async fn run() -> Result<Vec<Check>, BoxError> {
    println!(
        "== commit-to-ack latency: {WRITERS} writers, one-event transactions, {}s warm-up + {}s measured ==",
        WARMUP.as_secs(),
        RUN.as_secs()
    );
    let mut checks = Vec::new();
    for rate in rates()? {
        // What the writers reached with no outbox code, as the machine's
        // ceiling beside the write-rate targets.
        let mut ceiling = None;
        let (p50_target, p99_target) = match rate {
            1000 => (Duration::from_millis(3), Duration::from_millis(10)),
            _ => (Duration::from_millis(5), Duration::from_millis(20)),
        };
        if rate == 5000 {
            for baseline in [Placement::RawStatement, Placement::Nowhere] {
                let case = measure(baseline, rate, Writes::PlaceNew).await?;
                let mut commits = case.commit_latencies.clone();
                println!(
                    "{rate:>5}/s offered, {:<30} achieved {:>6} tx/s ({:5.1}%) | commit p50 {} p99 {} | {} (baseline, no target)\n   {}",
                    baseline.label(),
                    thousands(case.achieved),
                    100.0 * case.achieved / rate as f64,
                    ms(percentile(&mut commits, 0.5)),
                    ms(percentile(&mut commits, 0.99)),
                    case.lag_line(),
                    case.cpu
                );
                case.print_statements();
                if baseline == Placement::RawStatement {
                    ceiling = Some(case.achieved / rate as f64);
                }
            }
        }
        for placement in [Placement::InProcess, Placement::OtherProcess] {
            let mut case = measure(placement, rate, Writes::PlaceNew).await?;
            let p50 = percentile(&mut case.latencies, 0.5);
            let p99 = percentile(&mut case.latencies, 0.99);
            let p999 = percentile(&mut case.latencies, 0.999);
            let max = case.latencies.last().copied().unwrap_or_default();
            let share = case.achieved / rate as f64;
            println!(
                "{rate:>5}/s offered, {:<30} achieved {:>6} tx/s ({:5.1}%) | commit-to-ack p50 {} p99 {} p99.9 {} max {} \
                 | {} acked before commit() returned, {} missing | commit p50 {} p99 {}",
                placement.label(),
                thousands(case.achieved),
                100.0 * share,
                ms(p50),
                ms(p99),
                ms(p999),
                ms(max),
                case.acked_before_commit_returned,
                case.missing,
                ms(percentile(&mut case.commit_latencies, 0.5)),
                ms(percentile(&mut case.commit_latencies, 0.99)),
            );
            println!("   {}", case.lag_line());
            println!(
                "   {}; {} batches, {:.1} messages per batch",
                case.cpu,
                case.batches,
                case.published as f64 / case.batches.max(1) as f64
            );
            case.print_statements();
            let what = |w: &str| format!("{w} at {rate}/s, {}", placement.label());
            checks.push(Check::new(
                what("commit-to-ack p50"),
                ms(p50),
                format!("< {}", ms(p50_target)),
                p50 < p50_target && case.missing == 0,
            ));
            checks.push(Check::new(
                what("commit-to-ack p99"),
                ms(p99),
                format!("< {}", ms(p99_target)),
                p99 < p99_target && case.missing == 0,
            ));
            checks.push(Check::new(
                what("achieved write rate"),
                format!("{} tx/s ({:.1}%)", thousands(case.achieved), 100.0 * share),
                match ceiling {
                    Some(ceiling) => format!(
                        ">= 95% of offered (no outbox code: {:.1}%)",
                        100.0 * ceiling
                    ),
                    None => ">= 95% of offered".to_owned(),
                },
                share >= 0.95,
            ));
        }
    }
    Ok(checks)
}

/// The offered rates to measure: 1,000 and 5,000 events/s, or those listed
/// in `OUTBOX_BENCH_RATES` (e.g. `5000`, to study one rate).
fn rates() -> Result<Vec<u64>, BoxError> {
    match std::env::var("OUTBOX_BENCH_RATES") {
        Ok(list) => list
            .split(',')
            .map(|rate| {
                rate.trim()
                    .parse()
                    .map_err(|_| format!("OUTBOX_BENCH_RATES: `{rate}` is not a rate").into())
            })
            .collect(),
        Err(_) => Ok(vec![1000, 5000]),
    }
}

impl Case {
    /// The writers' schedule lag (see [`offered`]).
    fn lag_line(&self) -> String {
        let mut lags = self.schedule_lags.clone();
        format!(
            "schedule lag p50 {} p99 {} max {}",
            ms(percentile(&mut lags, 0.5)),
            ms(percentile(&mut lags, 0.99)),
            ms(lags.last().copied().unwrap_or_default())
        )
    }

    /// Statements per second in the measured window, by kind.
    fn print_statements(&self) {
        let line: Vec<String> = self
            .statements
            .iter()
            .map(|(kind, n)| format!("{kind} {:.0}", *n as f64 / RUN.as_secs_f64()))
            .collect();
        println!("   statements/s: {}", line.join(", "));
    }
}

/// One committed message of a writer.
struct Commit {
    id: MessageId,
    /// Wall clock right after `commit()` returned.
    returned: SystemTime,
    /// How long the unit of work took, `begin()` to `commit()` returned.
    took: Duration,
    /// How late it started after its scheduled tick (see [`offered`]).
    lag: Duration,
    /// Begun and committed inside the measured window.
    in_window: bool,
}

pub(crate) async fn measure(
    placement: Placement,
    rate: u64,
    writes: Writes,
) -> Result<Case, BoxError> {
    let bench = BenchDb::create().await?;
    let stream = BenchStream::create().await?;
    let mut db = bench.connect(POOL).await?;
    if let Writes::Amend { history } = writes {
        write_history(&db, &stream.prefix, history).await?;
    }
    let log = StatementLog::install(&mut db);
    let outbox = Outbox::new(db.clone(), config(&stream.prefix)?);
    let acks = Acks::default();
    let (processor, mut child) = match placement {
        Placement::InProcess => {
            let publisher = RecordingPublisher::new(
                JetStreamPublisher::new(stream.client.clone(), "/txoutbox-bench"),
                acks.clone(),
            );
            (Some(outbox.processor(publisher).build()?.spawn()), None)
        }
        Placement::OtherProcess => (
            None,
            Some(processor::start(&bench.schema, &stream.prefix).await?),
        ),
        Placement::Nowhere | Placement::RawStatement => (None, None),
    };

    let started = Instant::now();
    let measure_from = started + WARMUP;
    let deadline = measure_from + RUN;
    let measured = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let (outbox, measured) = (outbox.clone(), Arc::clone(&measured));
        let prefix = stream.prefix.clone();
        writers.push(tokio::spawn(async move {
            let mut ticks = offered::schedule(started.into(), writer, WRITERS, rate);
            let mut commits: Vec<Commit> = Vec::new();
            let mut n = 0u64;
            loop {
                let tick = ticks.tick().await.into_std();
                if Instant::now() >= deadline {
                    return Ok::<_, BoxError>(commits);
                }
                n += 1;
                let order_id = format!("w{writer}-{n}");
                let (began, ids) = if placement == Placement::RawStatement {
                    let statement = raw_save(&order_id, &prefix)?;
                    let began = Instant::now();
                    outbox.db().execute_raw(statement.sql).await?;
                    (began, vec![statement.id])
                } else if writes == Writes::PlaceNew {
                    let mut order = BenchOrder::place(order_id)?;
                    let began = Instant::now();
                    let mut uow = outbox.begin();
                    uow.save(&mut order).await?;
                    (began, uow.commit().await?)
                } else {
                    let began = Instant::now();
                    let mut uow = outbox.begin();
                    let mut order = uow
                        .load::<BenchOrder>(format!("w{writer}"))
                        .await?
                        .ok_or("the writer's order is missing")?;
                    order.amend(order_id)?;
                    uow.save(&mut order).await?;
                    (began, uow.commit().await?)
                };
                let returned = SystemTime::now();
                let done = Instant::now();
                // Committed inside the measured window.
                let in_window = began >= measure_from && done < deadline;
                if in_window {
                    measured.fetch_add(1, Ordering::Relaxed);
                }
                for id in ids {
                    commits.push(Commit {
                        id,
                        returned,
                        took: done - began,
                        lag: began - tick,
                        in_window,
                    });
                }
            }
        }));
    }
    // The measured window: CPU time and statements from its start to its end.
    tokio::time::sleep_until(measure_from.into()).await;
    let (cpu, statements_from) = (CpuTimes::now(), log.snapshot());
    mark(child.as_mut()).await?;
    tokio::time::sleep_until(deadline.into()).await;
    let (cpu, statements_to) = (CpuTimes::now().since(&cpu), log.snapshot());
    mark(child.as_mut()).await?;
    let mut statements: Vec<(String, u64)> = pgstats::between(&statements_from, &statements_to)
        .into_iter()
        .map(|(kind, n)| (format!("{kind} (writers' process)"), n))
        .collect();

    let mut commits: Vec<Commit> = Vec::new();
    for writer in writers {
        commits.extend(writer.await??);
    }
    let achieved = measured.load(Ordering::Relaxed) as f64 / RUN.as_secs_f64();

    // Wait for the last acks, then collect them.
    let settle_until = Instant::now() + SETTLE;
    let (ack_times, report): (HashMap<MessageId, SystemTime>, ProcessorReport) =
        match (processor, child) {
            (Some(processor), _) => {
                while acks.len() < commits.len() && Instant::now() < settle_until {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let report = processor.shutdown().await?;
                (acks.take().into_iter().collect(), report)
            }
            (None, Some(child)) => {
                while pending(&db).await? > 0 && Instant::now() < settle_until {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let (acks, report, child_statements) = collect_child(child).await?;
                statements.extend(
                    child_statements
                        .into_iter()
                        .map(|(kind, n)| (format!("{kind} (processor's process)"), n)),
                );
                (acks, report)
            }
            (None, None) => (HashMap::new(), ProcessorReport::default()),
        };

    let mut case = Case {
        achieved,
        latencies: Vec::new(),
        commit_latencies: Vec::new(),
        schedule_lags: Vec::new(),
        acked_before_commit_returned: 0,
        missing: 0,
        cpu,
        batches: report.batches,
        published: report.published,
        statements,
    };
    for Commit {
        id,
        returned,
        took,
        lag,
        in_window,
    } in commits
    {
        if !in_window {
            continue;
        }
        case.commit_latencies.push(took);
        case.schedule_lags.push(lag);
        if matches!(placement, Placement::Nowhere | Placement::RawStatement) {
            continue;
        }
        match ack_times.get(&id) {
            Some(acked) => match acked.duration_since(returned) {
                Ok(latency) => case.latencies.push(latency),
                Err(_) => {
                    case.acked_before_commit_returned += 1;
                    case.latencies.push(Duration::ZERO);
                }
            },
            None => case.missing += 1,
        }
    }
    drop(outbox);
    db.close().await?;
    stream.delete().await?;
    drop(bench);
    Ok(case)
}

/// Each writer's order `w<n>`, at version `history`, with `history`
/// published outbox rows (sequences 1..=history), written in SQL.
async fn write_history(
    db: &sea_orm::DatabaseConnection,
    prefix: &str,
    history: u64,
) -> Result<(), BoxError> {
    let started = Instant::now();
    for writer in 0..WRITERS {
        db.execute_unprepared(&format!(
            "INSERT INTO orders (id, status, total_cents, version) VALUES ('w{writer}', 'placed', 100, {history})"
        ))
        .await?;
        db.execute_unprepared(&format!(
            "INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, sequence, event_name, \
             event_version, subject, payload, correlation_id, occurred_at, created_at, status, \
             attempts, next_attempt_at, published_at) \
             SELECT gen_random_uuid(), 'bench_order', 'w{writer}', g, 'bench.event', 1, \
             '{prefix}.bench.event', '{{\"key\":\"history\"}}', 'history', now(), now(), 1, 0, \
             now(), now() FROM generate_series(1, {history}) AS g"
        ))
        .await?;
    }
    db.execute_unprepared("VACUUM ANALYZE outbox_messages")
        .await?;
    println!(
        "   ({} published rows written in {:.1} s, not measured)",
        thousands((history * WRITERS as u64) as f64),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What the unit of work sends to save a new order and its one event on
/// PostgreSQL without a lease at commit, written out: the same rows, the
/// same ~300-byte payload, one statement. Sent by the
/// [`Placement::RawStatement`] writers, it measures what these writers
/// achieve on this machine with no outbox code at all.
fn raw_save(order_id: &str, prefix: &str) -> Result<RawSave, BoxError> {
    const SQL: &str = "WITH aggregate_written AS (\
         INSERT INTO orders (id, status, total_cents, version) VALUES ($1, 'placed', 100, 1) RETURNING 1) \
         INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, sequence, event_name, \
         event_version, subject, payload, headers, correlation_id, causation_id, tenant, traceparent, \
         occurred_at, created_at, status, attempts, next_attempt_at) \
         SELECT * FROM (VALUES ($2, 'bench_order', $1, 1, 'bench.event', 1, $3, CAST($4 AS jsonb), \
         CAST(NULL AS jsonb), $5, CAST(NULL AS varchar), CAST(NULL AS varchar), CAST(NULL AS varchar), \
         now(), now(), 0, 0, now())) AS v WHERE EXISTS (SELECT 1 FROM aggregate_written)";
    let id = MessageId::new();
    let payload = serde_json::to_string(&BenchEvent::new(order_id.to_owned()))?;
    let sql = Statement::from_sql_and_values(
        DbBackend::Postgres,
        SQL,
        [
            order_id.into(),
            uuid::Uuid::from(id).into(),
            format!("{prefix}.bench_order.bench.event").into(),
            payload.into(),
            id.to_string().into(),
        ],
    );
    Ok(RawSave { id, sql })
}

/// A [`raw_save`] statement and the id of the message it writes.
struct RawSave {
    id: MessageId,
    sql: Statement,
}

/// Unpublished rows.
async fn pending(db: &sea_orm::DatabaseConnection) -> Result<i64, BoxError> {
    let sql = "SELECT count(*) AS n FROM outbox_messages WHERE status = 0";
    pgstats::scalar(db, sql, "n").await
}

/// What the processor child reports: acks, its report (batches and
/// published only) and the statements it sent in the measured window.
type ChildOutput = (
    HashMap<MessageId, SystemTime>,
    ProcessorReport,
    Vec<(String, u64)>,
);

/// Tells the processor child (if any) to snapshot its statement counts.
async fn mark(child: Option<&mut Proc>) -> Result<(), BoxError> {
    if let Some(child) = child {
        child.send("mark").await?;
    }
    Ok(())
}

/// Closes the child's input, which stops its processor, and reads its
/// output.
async fn collect_child(child: Proc) -> Result<ChildOutput, BoxError> {
    let mut acks = HashMap::new();
    let mut done = false;
    let mut report = ProcessorReport::default();
    let mut statements = Vec::new();
    for line in child.output().await? {
        let mut fields = line.split_whitespace();
        match (fields.next(), fields.next(), fields.next()) {
            (Some("ack"), Some(id), Some(nanos)) => {
                let at = UNIX_EPOCH + Duration::from_nanos(nanos.parse()?);
                acks.insert(id.parse::<MessageId>()?, at);
            }
            (Some("stmt"), Some(count), Some(_)) => {
                let kind = line
                    .split_whitespace()
                    .skip(2)
                    .collect::<Vec<_>>()
                    .join(" ");
                statements.push((kind, count.parse()?));
            }
            (Some("done"), Some(published), Some(batches)) => {
                report.published = published.parse()?;
                report.batches = batches.parse()?;
                done = true;
            }
            _ => return Err(format!("unexpected line from the processor child: {line:?}").into()),
        }
    }
    if !done {
        return Err("the processor child ended without its `done` line".into());
    }
    Ok((acks, report, statements))
}
