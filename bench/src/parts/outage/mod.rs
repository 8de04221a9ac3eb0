//! `outage`: back to steady after a broker outage (issues 22 and 34), on
//! PostgreSQL, MariaDB and SQLite. Writers in another process (this binary
//! as `writer-child`, 400 events/s over 2,000 accounts, 20 of them hot) and
//! a processor with default settings in this process, publishing through a
//! client connected as the library connects it (`NatsConnect`, async-nats's
//! reconnect defaults) to a private nats-server that is killed for 2 s,
//! restarted, and later killed for 10 s.
//!
//! The table is sampled every 50 ms (`probe.rs`); the processor's publish
//! calls and the client's connection state are watched from inside
//! (`watch.rs`). Times are since the broker's return (the restarted server
//! answers JetStream requests): when the client reconnected, when the first
//! publish was acknowledged, when every row committed before the return was
//! published, and when the backlog was back at its steady level; "back to
//! steady" is the later of the last two.

mod probe;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use txoutbox_fixtures::nats::NatsServer;
use txoutbox_fixtures::{Backend, TestDb};
use txoutbox_nats::{JetStreamPublisher, NatsConnect, StreamSpec};
use txoutbox_sea_orm::Outbox;

use self::probe::{Sample, sample_until};
use self::watch::{Attempts, Connection, Outcome, WatchedPublisher};
use crate::children::protocol::{Proc, args};
use crate::children::writer;
use crate::harness::error::BoxError;
use crate::harness::fixture;
use crate::harness::record::{OpFigures, StoreCounts, counted_processor};
use crate::harness::report::Check;
use crate::harness::stats::{ms, percentile};

const RATE: u64 = 400;
const WARM: Duration = Duration::from_secs(3);
const STEADY: Duration = Duration::from_secs(6);
/// The outages, in this order, on one server and one processor.
const OUTAGES: [Duration; 2] = [Duration::from_secs(2), Duration::from_secs(10)];
/// Sampling after the return ends this long after the outbox is back to
/// steady, or after `AFTER_LONGEST`.
const AFTER_TAIL: Duration = Duration::from_secs(2);
const AFTER_LONGEST: Duration = Duration::from_secs(20);
const SAMPLE: Duration = Duration::from_millis(50);
/// How long the writers may take to stop once told.
const WRITERS_STOP: Duration = Duration::from_secs(30);
/// Targets: the oldest claimable row while the broker is up (2 x
/// `poll_interval`), and the time back to steady after the broker returns.
const AGE_TARGET: Duration = Duration::from_secs(2);
const BACK_TARGET: Duration = Duration::from_secs(2);

/// Runs the part on each backend and returns its checks.
pub(crate) async fn run() -> Result<Vec<Check>, BoxError> {
    println!(
        "== outage: back to steady after broker outages of {} s, writers in another process at \
         {RATE} events/s ==",
        OUTAGES
            .iter()
            .map(|o| o.as_secs().to_string())
            .collect::<Vec<_>>()
            .join(" and ")
    );
    let mut checks = Vec::new();
    let mut rows = Vec::new();
    for backend in [Backend::Postgres, Backend::MySql, Backend::Sqlite] {
        let (backend_checks, backend_rows) = one(backend).await?;
        checks.extend(backend_checks);
        rows.extend(backend_rows);
    }
    println!(
        "times since the broker's return (JetStream answering); \"reconnect\": the client seen \
         connected again; \"resumed\": the first ack; \"before\": every row committed before the \
         return published; \"level\": backlog at its steady level"
    );
    println!(
        "| backend | down | server start | reconnect | resumed | failed calls after reconnect | \
         before | level | back to steady | peak | leased at return |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
    Ok(checks)
}

async fn one(backend: Backend) -> Result<(Vec<Check>, Vec<String>), BoxError> {
    let name = format!("{backend:?}");
    let test = TestDb::with_schema(backend).await;
    let mut server = NatsServer::start().await.expect("a private nats-server");
    let prefix = format!("outage{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    StreamSpec::new(format!("OUTAGE_{prefix}"), [format!("{prefix}.>")])
        .ensure(&async_nats::jetstream::new(
            server
                .connect()
                .await
                .expect("a client of the private nats-server"),
        ))
        .await?;
    // Connected as a service connects: the library's settings.
    let client = NatsConnect::new(server.url()).connect().await?;
    let (connection, watching) = Connection::watch(client.clone());
    let attempts = Attempts::default();
    let counts = Arc::new(StoreCounts::default());
    let outbox = Outbox::new(test.db.clone(), fixture::config(&prefix)?);
    let processor = counted_processor(
        &outbox,
        WatchedPublisher::new(
            JetStreamPublisher::new(client, "/txoutbox-bench"),
            attempts.clone(),
        ),
        Arc::clone(&counts),
    )
    .build()?
    .spawn();
    let writers = spawn_writers(&test, &prefix).await?;
    tokio::time::sleep(WARM).await;

    let mut checks = Vec::new();
    let mut rows = Vec::new();
    for outage in OUTAGES {
        let episode = Episode::run(&test, &mut server, outage, &counts).await?;
        let figures = episode.figures(&attempts, &connection);
        println!(
            "{name}, broker down {} s: {}",
            outage.as_secs(),
            figures.line
        );
        rows.push(format!(
            "| {name} | {} s | {}",
            outage.as_secs(),
            figures.row
        ));
        checks.push(Check::new(
            format!(
                "outage {name} {} s: oldest claimable row while up",
                outage.as_secs()
            ),
            ms(episode.steady_age()),
            format!("<= {} (2 x poll_interval)", ms(AGE_TARGET)),
            episode.steady_age() <= AGE_TARGET,
        ));
        checks.push(Check::new(
            format!(
                "outage {name} {} s: back to steady after the return",
                outage.as_secs()
            ),
            figures.back.map_or("never".to_owned(), secs),
            format!("<= {}", secs(BACK_TARGET)),
            figures.back.is_some_and(|back| back <= BACK_TARGET),
        ));
    }

    let (_, said) = writers.stopped(WRITERS_STOP).await?;
    println!("{name}: writers: {}", said.unwrap_or_default().trim());
    processor.shutdown().await?;
    watching.abort();
    Ok((checks, rows))
}

/// One outage: the steady phase before it, the kill, the return, and the
/// samples after it.
struct Episode {
    steady: Vec<Sample>,
    killed: Instant,
    spawned: Instant,
    returned: Instant,
    after: Vec<Sample>,
    threshold: i64,
    /// The store's calls between the return and the first sample back to
    /// steady (or the end of the sampling).
    calls: Vec<OpFigures>,
}

/// An episode's figures, as a sentence and as a table row.
struct Figures {
    line: String,
    row: String,
    back: Option<Duration>,
}

impl Episode {
    async fn run(
        test: &TestDb,
        server: &mut NatsServer,
        outage: Duration,
        counts: &StoreCounts,
    ) -> Result<Self, BoxError> {
        let backend = test.backend();
        let steady = sample_until(&test.db, backend, None, SAMPLE, STEADY, |_| false).await?;
        let killed = Instant::now();
        server.kill();
        tokio::time::sleep(outage).await;
        let spawned = Instant::now();
        server.restart().await.expect("nats-server restarted");
        let returned = Instant::now();
        let cutoff = chrono::Utc::now();
        let at_return = counts.snapshot();
        let mut at_back = None;
        let threshold = steady.iter().map(|s| s.backlog).max().unwrap_or(0).max(20);
        let mut back_at = None;
        let after = sample_until(
            &test.db,
            backend,
            Some(cutoff),
            SAMPLE,
            AFTER_LONGEST,
            |samples| {
                let last = samples.last().expect("a sample");
                if back_at.is_none() && is_back(last, threshold) {
                    back_at = Some(last.at);
                    at_back = Some(counts.snapshot());
                }
                back_at.is_some_and(|at| at.elapsed() >= AFTER_TAIL)
            },
        )
        .await?;
        let calls = difference(&at_back.unwrap_or_else(|| counts.snapshot()), &at_return);
        Ok(Self {
            calls,
            steady,
            killed,
            spawned,
            returned,
            after,
            threshold,
        })
    }

    /// The oldest claimable row while the broker was up before the kill.
    fn steady_age(&self) -> Duration {
        self.steady.iter().map(|s| s.age).max().unwrap_or_default()
    }

    fn since_return(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.returned)
    }

    fn figures(&self, attempts: &Attempts, connection: &Connection) -> Figures {
        let first = |pred: &dyn Fn(&Sample) -> bool| {
            self.after
                .iter()
                .find(|s| pred(s))
                .map(|s| self.since_return(s.at))
        };
        let before = first(&|s| s.before == 0);
        let level = first(&|s| s.backlog <= self.threshold && s.age <= AGE_TARGET);
        let back = first(&|s| is_back(s, self.threshold));
        let reconnect = connection.reconnected_after(self.killed);
        let calls = attempts.since(self.killed);
        let resumed = calls
            .iter()
            .find(|a| a.outcome == Outcome::Acked && a.ended >= self.spawned)
            .map(|a| a.ended);
        let failed_after_reconnect = reconnect.map_or(0, |reconnect| {
            calls
                .iter()
                .filter(|a| a.started >= reconnect && a.outcome != Outcome::Acked)
                .filter(|a| resumed.is_none_or(|resumed| a.started < resumed))
                .count()
        });
        let failed_during = calls
            .iter()
            .filter(|a| a.started < self.spawned && a.outcome != Outcome::Acked)
            .count();
        let last_failed = calls
            .iter()
            .filter(|a| a.outcome != Outcome::Acked)
            .filter(|a| resumed.is_none_or(|resumed| a.started < resumed))
            .map(|a| a.started)
            .max();
        let peak = self.after.iter().map(|s| s.backlog).max().unwrap_or(0);
        let leased = self.after.first().map_or(0, |s| s.leased);
        // The most pending rows of one aggregate: at the return, and each
        // second after it (a claim takes an aggregate's run whole, or its
        // head alone when the run is cut).
        let deepest: Vec<String> = self
            .after
            .iter()
            .step_by((Duration::from_secs(1).as_millis() / SAMPLE.as_millis()) as usize)
            .map(|s| s.deepest.to_string())
            .collect();
        let mut steady: Vec<Duration> = self
            .steady
            .iter()
            .map(|s| Duration::from_millis(s.backlog.max(0) as u64))
            .collect();
        let steady_p50 = percentile(&mut steady, 0.5).as_millis();
        let start = self.returned - self.spawned;
        let store = self
            .calls
            .iter()
            .filter(|c| c.calls > 0 && c.name != "stats")
            .map(|c| {
                format!(
                    "{} {} x ({} rows, {:.2} s)",
                    c.name,
                    c.calls,
                    c.rows,
                    c.total.as_secs_f64()
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let at = |t: Option<Instant>| t.map_or("-".to_owned(), |t| self.signed(t));
        let dur = |d: Option<Duration>| d.map_or("never".to_owned(), secs);
        let line = format!(
            "steady backlog p50 {steady_p50}, max {} rows; server up {} after its start; \
             client reconnected {}; {failed_during} failed publish calls during the outage, \
             {failed_after_reconnect} after the reconnect (last failed {}); first ack {}; rows \
             committed before the return all published {}; backlog at level {}; back to steady \
             {}; peak {peak} rows, {leased} leased at the return; store calls from the return \
             until back: {store}; most pending rows of one aggregate each second from the return: \
             {}",
            self.threshold,
            secs(start),
            at(reconnect),
            at(last_failed),
            at(resumed),
            dur(before),
            dur(level),
            dur(back),
            deepest.join(" "),
        );
        let row = format!(
            "{} | {} | {} | {failed_after_reconnect} | {} | {} | {} | {peak} | {leased} |",
            secs(start),
            at(reconnect),
            at(resumed),
            dur(before),
            dur(level),
            dur(back),
        );
        Figures { line, row, back }
    }

    /// `at` relative to the return, signed (the client may reconnect while
    /// the restarted server is still recovering its streams).
    fn signed(&self, at: Instant) -> String {
        if at >= self.returned {
            format!("+{}", secs(at - self.returned))
        } else {
            format!("-{}", secs(self.returned - at))
        }
    }
}

/// The calls of `later` not yet made at `earlier`.
fn difference(later: &[OpFigures], earlier: &[OpFigures]) -> Vec<OpFigures> {
    later
        .iter()
        .map(|l| {
            let e = earlier.iter().find(|e| e.name == l.name);
            OpFigures {
                name: l.name.clone(),
                calls: l.calls - e.map_or(0, |e| e.calls),
                rows: l.rows - e.map_or(0, |e| e.rows),
                total: l
                    .total
                    .saturating_sub(e.map_or(Duration::ZERO, |e| e.total)),
            }
        })
        .collect()
}

/// Back to steady: every row committed before the return published, the
/// backlog at or under the steady phase's largest, and no claimable row
/// older than the target.
fn is_back(sample: &Sample, threshold: i64) -> bool {
    sample.before == 0 && sample.backlog <= threshold && sample.age <= AGE_TARGET
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// Starts the writer child on `test`'s database and waits for its `ready`.
async fn spawn_writers(test: &TestDb, prefix: &str) -> Result<Proc, BoxError> {
    let (url, schema) = test.location();
    let rate = RATE.to_string();
    let mut argv = vec![
        writer::PART,
        "--url",
        &url,
        "--prefix",
        prefix,
        "--rate",
        &rate,
    ];
    if let Some(schema) = &schema {
        argv.extend(["--schema", schema]);
    }
    Proc::start("writer child", &args(&argv)).await
}
