//! `drain`: one processor draining a fresh table of 200,000 pending
//! ~300-byte events (each its own aggregate) with the default settings,
//! against the targets and both ceilings of the same run.
//!
//! Also the measured drain every `drain-*` part runs ([`drain`],
//! [`drain_on`]): the processor runs in a process of its own
//! (`txoutbox-bench drain-child`, see [`crate::children::drain`]), so the
//! memory figures are the processor's alone. Around it, this side counts the
//! transactions PostgreSQL committed and the CPU time by process, and checks
//! that every row was published and stored once.

use std::time::Duration;

use sea_orm::ConnectionTrait;

use crate::children::drain::{self as drain_child, Output, Settings};
use crate::children::protocol::Proc;
use crate::harness::error::BoxError;
use crate::harness::fixture::{self, BenchDb, BenchStream, Broker, fill};
use crate::harness::machine::CpuTimes;
use crate::harness::memory::{self, mib};
use crate::harness::pgstats;
use crate::harness::private_pg::PrivatePostgres;
use crate::harness::report::{Check, thousands};
use crate::parts::jetstream::JetStreamCeiling;
use crate::parts::naive::{self, NaiveRelay};

/// Rows of the `drain` and `drain-tune` backlogs.
pub(crate) const ROWS: u64 = naive::ROWS;
/// Drain rate target, events per second.
pub(crate) const TARGET_RATE: f64 = 28_000.0;
/// Target ratio to the naive loop of the same run.
const TARGET_OVER_NAIVE: f64 = 1.4;
/// Target statements per event.
const TARGET_STATEMENTS: f64 = 0.01;

/// The ceilings measured earlier in the same run, if any.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Ceilings {
    pub(crate) jetstream: Option<JetStreamCeiling>,
    pub(crate) naive: Option<NaiveRelay>,
}

/// `drain`: the default settings on 200,000 rows.
pub(crate) async fn run(ceilings: Ceilings) -> Result<Vec<Check>, BoxError> {
    println!(
        "== drain: {} pending rows, one processor, default settings ==",
        thousands(ROWS as f64)
    );
    let drained = drain(Settings::default(), ROWS, ROWS, Duration::from_millis(100)).await?;
    drained.print();
    drained.print_details();
    Ok(checks(&drained, ceilings))
}

/// The targets of a drain, with its ratios to the ceilings.
pub(crate) fn checks(drained: &Drain, ceilings: Ceilings) -> Vec<Check> {
    let rate = drained.rate();
    let mut checks = vec![Check::new(
        "drain rate, one processor, 200,000 rows",
        format!("{} events/s", thousands(rate)),
        format!(">= {} events/s", thousands(TARGET_RATE)),
        rate >= TARGET_RATE,
    )];
    match ceilings.naive {
        Some(naive) => {
            checks.push(Check::new(
                "drain / naive loop of this run",
                format!(
                    "x{:.2} (naive {}/s)",
                    rate / naive.one,
                    thousands(naive.one)
                ),
                format!(">= x{TARGET_OVER_NAIVE}"),
                rate >= TARGET_OVER_NAIVE * naive.one,
            ));
            println!(
                "ratio to the naive loop: x{:.2} of one loop ({}/s), x{:.2} of two loops ({}/s)",
                rate / naive.one,
                thousands(naive.one),
                rate / naive.two,
                thousands(naive.two)
            );
        }
        None => println!("(no naive-loop ratio: run the `naive` part in the same run)"),
    }
    match ceilings.jetstream {
        Some(js) => println!(
            "ratio to the JetStream ceiling: {:.0}% of raw publishing ({}/s), {:.0}% of JetStreamPublisher ({}/s)",
            100.0 * rate / js.raw,
            thousands(js.raw),
            100.0 * rate / js.publisher,
            thousands(js.publisher)
        ),
        None => println!("(no JetStream ratio: run the `jetstream` part in the same run)"),
    }
    let per_event = drained.statements_sent() as f64 / drained.rows as f64;
    checks.push(Check::new(
        "statements per event while draining (all sent)",
        format!("{per_event:.4}"),
        format!("<= {TARGET_STATEMENTS}"),
        per_event <= TARGET_STATEMENTS,
    ));
    let transactions = drained.transactions as f64 / drained.rows as f64;
    checks.push(Check::new(
        "transactions per event while draining (pg_stat_database)",
        format!("{transactions:.4}"),
        format!("<= {TARGET_STATEMENTS} (info)"),
        transactions <= TARGET_STATEMENTS,
    ));
    checks.push(Check::new(
        "peak RSS of the processor's process while draining",
        mib(drained.child.peak),
        "(info)",
        true,
    ));
    checks
}

/// What one drain measured.
#[derive(Debug)]
pub(crate) struct Drain {
    pub(crate) settings: Settings,
    pub(crate) rows: u64,
    /// What the processor's process measured.
    pub(crate) child: Output,
    /// Transactions PostgreSQL counted on the database meanwhile.
    pub(crate) transactions: i64,
    /// Other clients connected to the database at the start.
    pub(crate) other_clients: i64,
    /// Whether `pg_stat_statements` is loaded on the server.
    pub(crate) pg_stat_statements: bool,
    pub(crate) cpu: String,
    /// CPU seconds of a private server's processes while draining, when it
    /// ran on one.
    pub(crate) server_cpu: Option<f64>,
    /// The table's row-change counters before the drain.
    pub(crate) table_before: pgstats::TableStats,
    /// The table's row-change counters afterwards.
    pub(crate) table: pgstats::TableStats,
}

impl Drain {
    /// Events per second.
    pub(crate) fn rate(&self) -> f64 {
        self.rows as f64 / self.child.elapsed.as_secs_f64()
    }

    /// The calls, rows and time of one kind of store call.
    fn op(&self, name: &str) -> (u64, u64, Duration) {
        self.child
            .ops
            .iter()
            .find(|op| op.name == name)
            .map_or((0, 0, Duration::ZERO), |op| (op.calls, op.rows, op.total))
    }

    /// Claims, by age or by id: each a transaction of its own.
    pub(crate) fn claims(&self) -> u64 {
        self.op("claim").0 + self.op("claim_ids").0
    }

    /// Store calls of every kind.
    pub(crate) fn store_calls(&self) -> u64 {
        self.child.ops.iter().map(|op| op.calls).sum()
    }

    fn prepared(&self) -> u64 {
        self.child.statements.iter().map(|(_, n, _)| n).sum()
    }

    /// Everything sent to PostgreSQL: the statements SeaORM saw plus one per
    /// claim (the store sends its claim as one unnamed statement through the
    /// sqlx pool, past SeaORM's metric callback).
    pub(crate) fn statements_sent(&self) -> u64 {
        self.prepared() + self.claims()
    }

    /// Prints the drain's line.
    pub(crate) fn print(&self) {
        let per_event = |n: f64| n / self.rows as f64;
        let mean_ms = |(calls, _, total): (u64, u64, Duration)| {
            total.as_secs_f64() * 1e3 / calls.max(1) as f64
        };
        let (claim_calls, claim_rows, claim_total) = self.op("claim");
        println!(
            "{}: {:>7} events/s in {:5.1} s | claim {:6.2} ms avg × {claim_calls}, complete {:5.2} ms avg | \
             {:.4} stmts/event, {:.4} tx/event | peak RSS {}",
            self.settings,
            thousands(self.rate()),
            self.child.elapsed.as_secs_f64(),
            mean_ms((claim_calls, claim_rows, claim_total)),
            mean_ms(self.op("complete")),
            per_event(self.statements_sent() as f64),
            per_event(self.transactions as f64),
            memory::mib(self.child.peak),
        );
    }

    /// Prints where the time and the statements went.
    pub(crate) fn print_details(&self) {
        let per_event = |n: u64| n as f64 / self.rows as f64;
        let wall = self.child.elapsed.as_secs_f64();
        println!("   processor report: {:?}", self.child.report);
        println!(
            "   store calls ({:.4}/event):",
            per_event(self.store_calls())
        );
        for op in self.child.ops.iter().filter(|op| op.calls > 0) {
            println!(
                "     {:<10} {:>6} calls, {:>8} rows, {:8.1} ms total ({:5.1}% of the drain's wall time), {:.2} ms avg",
                op.name,
                op.calls,
                op.rows,
                op.total.as_secs_f64() * 1e3,
                100.0 * op.total.as_secs_f64() / wall,
                op.total.as_secs_f64() * 1e3 / op.calls as f64
            );
        }
        let deciles: Vec<String> = self
            .child
            .claim_deciles
            .iter()
            .map(|d| format!("{:.1}", d.as_secs_f64() * 1e3))
            .collect();
        println!(
            "   claim time (ms) by tenth of the drain, first to last: {}",
            deciles.join(" ")
        );
        println!(
            "   statements sent: {} ({:.4}/event) = through SeaORM {} + {} claims (one unnamed statement each)",
            self.statements_sent(),
            per_event(self.statements_sent()),
            self.prepared(),
            self.claims()
        );
        for (kind, count, time) in &self.child.statements {
            println!(
                "     {kind:<28} {count:>6}, {:8.1} ms total, {:.2} ms avg",
                time.as_secs_f64() * 1e3,
                time.as_secs_f64() * 1e3 / (*count).max(1) as f64
            );
        }
        println!(
            "   PostgreSQL transactions on the database (pg_stat_database): {} ({:.4}/event); other clients connected: {}",
            self.transactions,
            self.transactions as f64 / self.rows as f64,
            self.other_clients
        );
        if !self.pg_stat_statements {
            println!(
                "   pg_stat_statements is not loaded on this server (it needs shared_preload_libraries and a \
                 restart): statements are counted on the client"
            );
        }
        println!(
            "   {} (the processor's process: {:.1} s, {:.1} µs/event)",
            self.cpu,
            self.child.cpu_seconds,
            self.child.cpu_seconds * 1e6 / self.rows as f64
        );
        println!("   outbox table afterwards: {}", self.table);
        println!(
            "   processor process memory: RSS {} at spawn, peak (VmHWM) {}",
            memory::mib(self.child.rss_before),
            memory::mib(self.child.peak)
        );
    }
}

/// Fills a fresh table with `rows` and drains it with one processor in a
/// child process, which samples its `VmRSS` every `sample_every`.
///
/// With `aggregates` below `rows`, the backlog is spread over that many
/// aggregates first ([`spread`]): the drain then publishes each
/// aggregate's messages in sequence order.
pub(crate) async fn drain(
    settings: Settings,
    rows: u64,
    aggregates: u64,
    sample_every: Duration,
) -> Result<Drain, BoxError> {
    drain_on(&Broker::shared(), settings, rows, aggregates, sample_every).await
}

/// [`drain`] publishing to `broker`.
pub(crate) async fn drain_on(
    broker: &Broker,
    settings: Settings,
    rows: u64,
    aggregates: u64,
    sample_every: Duration,
) -> Result<Drain, BoxError> {
    let shape = if aggregates < rows {
        Shape::Hot(aggregates)
    } else {
        Shape::Uniform
    };
    drain_shape(broker, settings, rows, shape, None, sample_every).await
}

/// The shape of a backlog: how its rows fall into aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Every message its own aggregate.
    Uniform,
    /// Spread over this many aggregates ([`spread`]).
    Hot(u64),
    /// Spread over this many aggregates, the head of the first one
    /// (`hot-0`, sequence 1) not publishable for a day, as a message
    /// waiting out a retry: everything behind it waits.
    BlockedHead(u64),
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Uniform => write!(f, "uniform"),
            Self::Hot(n) => write!(f, "{n} hot aggregates"),
            Self::BlockedHead(n) => write!(f, "{n} aggregates, one blocked head"),
        }
    }
}

/// Brings a filled backlog of `rows` into `shape`; returns how many of its
/// rows can be published (all but a blocked aggregate's).
pub(crate) async fn prepare(bench: &BenchDb, rows: u64, shape: Shape) -> Result<u64, BoxError> {
    match shape {
        Shape::Uniform => Ok(rows),
        Shape::Hot(aggregates) => {
            spread(bench, aggregates).await?;
            Ok(rows)
        }
        Shape::BlockedHead(aggregates) => {
            spread(bench, aggregates).await?;
            let db = bench.connect(1).await?;
            db.execute_unprepared(
                "UPDATE outbox_messages SET attempts = 1, next_attempt_at = now() + interval '1 day' \
                 WHERE aggregate_id = 'hot-0' AND sequence = 1",
            )
            .await?;
            let held: i64 = pgstats::scalar(
                &db,
                "SELECT count(*) AS n FROM outbox_messages WHERE aggregate_id = 'hot-0'",
                "n",
            )
            .await?;
            db.close().await?;
            Ok(rows - held as u64)
        }
    }
}

/// Waits for the backends of the fill and [`prepare`] to exit and flush
/// their row counters, which a table's "before" figures must include.
pub(crate) async fn settle_counters() {
    tokio::time::sleep(Duration::from_millis(1_000)).await;
}

/// [`drain_on`] of a backlog of `shape`; with `server`, also the CPU time
/// of that private server's processes while draining.
pub(crate) async fn drain_shape(
    broker: &Broker,
    settings: Settings,
    rows: u64,
    shape: Shape,
    server: Option<&PrivatePostgres>,
    sample_every: Duration,
) -> Result<Drain, BoxError> {
    let bench = BenchDb::create().await?;
    let stream = BenchStream::create_on(broker).await?;
    let fill_secs = fill(&bench, &stream.prefix, rows).await?;
    println!(
        "   ({} rows filled in {fill_secs:.1} s, not measured)",
        thousands(rows as f64)
    );
    let publishable = prepare(&bench, rows, shape).await?;
    settle_counters().await;

    let admin = fixture::admin().await?;
    let other_clients = pgstats::other_clients(&admin).await?;
    let pg_stat_statements = pgstats::pg_stat_statements(&admin).await?;
    let table_before = pgstats::table_stats(&admin, &bench.schema).await?;
    let (commits_before, rollbacks_before) = pgstats::transactions(&admin).await?;
    let cpu_before = CpuTimes::now();
    let server_cpu_before = server.map(PrivatePostgres::cpu_seconds);
    let mut process = Proc::start_with(
        "drain child",
        &drain_child::args(
            &bench.schema,
            &stream.prefix,
            publishable,
            settings,
            sample_every,
        ),
        &[
            ("OUTBOX_TEST_NATS_URL", &broker.urls),
            ("OUTBOX_TEST_POSTGRES_URL", &fixture::postgres_url()),
        ],
    )
    .await?;
    let drained = process.wait_for("drained").await;
    let server_cpu = server
        .zip(server_cpu_before)
        .map(|(server, before)| server.cpu_seconds() - before);
    let cpu = drained.map(|_| CpuTimes::now().since(&cpu_before));
    let text = process.output().await?.join("\n");
    let cpu = cpu.ok_or("the drain child never said `drained`")?;
    let child = drain_child::parse(&text)?;
    // The child's backends flushed their counters when its pool closed.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (commits_after, rollbacks_after) = pgstats::transactions(&admin).await?;
    let table = pgstats::table_stats(&admin, &bench.schema).await?;

    let unpublished = format!(
        "SELECT count(*) AS n FROM {}.outbox_messages WHERE status <> 1",
        bench.schema
    );
    let left: i64 = pgstats::scalar(&admin, unpublished, "n").await?;
    admin.close().await?;
    let stored = stream.messages().await?;
    // Acked at once, nothing reached the stream.
    let sent = if settings.instant_acks {
        0
    } else {
        publishable
    };
    if left as u64 != rows - publishable || stored != sent {
        return Err(format!(
            "after the drain {left} rows are unpublished and the stream holds {stored} of {sent}"
        )
        .into());
    }
    stream.delete().await?;
    drop(bench);
    Ok(Drain {
        settings,
        rows: publishable,
        child,
        transactions: (commits_after - commits_before) + (rollbacks_after - rollbacks_before),
        other_clients,
        pg_stat_statements,
        cpu,
        server_cpu,
        table_before,
        table,
    })
}

/// Rewrites the filled backlog (every message its own aggregate, ids in
/// commit order) into `aggregates` aggregates: row `n` in id order becomes
/// sequence `n / aggregates + 1` of aggregate `n % aggregates`, so each
/// aggregate's sequences rise with its ids, as the unit of work writes them.
pub(crate) async fn spread(bench: &BenchDb, aggregates: u64) -> Result<(), BoxError> {
    let started = std::time::Instant::now();
    let db = bench.connect(1).await?;
    db.execute_unprepared(&format!(
        "UPDATE outbox_messages AS m SET aggregate_id = 'hot-' || (r.n % {aggregates}), \
         sequence = r.n / {aggregates} + 1 \
         FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM outbox_messages) AS r \
         WHERE m.id = r.id"
    ))
    .await?;
    db.execute_unprepared("VACUUM ANALYZE outbox_messages")
        .await?;
    db.close().await?;
    println!(
        "   (spread over {} aggregates in {:.1} s, not measured)",
        thousands(aggregates as f64),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
