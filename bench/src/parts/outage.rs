//! `outage`: catch-up after a broker outage (issue 22), on PostgreSQL,
//! MariaDB and SQLite. Writers in another process (this binary as
//! `writer-child`, 400 events/s over 2,000 accounts, 20 of them hot) and a
//! processor with default settings in this process, publishing to a private
//! nats-server that is killed for 5 s and restarted. Sampled every 100 ms:
//! the backlog, and the age of the oldest *claimable* row (pending, no live
//! lease, not backing off, no earlier unpublished row of its aggregate):
//! the row a claim should have taken.

use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use txoutbox_fixtures::nats::NatsServer;
use txoutbox_fixtures::{Backend, TestDb};
use txoutbox_nats::{JetStreamPublisher, StreamSpec};
use txoutbox_sea_orm::Outbox;

use crate::children::protocol::{Proc, args};
use crate::children::writer;
use crate::harness::error::BoxError;
use crate::harness::fixture;
use crate::harness::report::Check;
use crate::harness::stats::{ms, percentile};

const RATE: u64 = 400;
const WARM: Duration = Duration::from_secs(3);
const STEADY: Duration = Duration::from_secs(10);
const OUTAGE: Duration = Duration::from_secs(5);
const AFTER: Duration = Duration::from_secs(15);
const SAMPLE: Duration = Duration::from_millis(100);
/// How long the writers may take to stop once told.
const WRITERS_STOP: Duration = Duration::from_secs(30);
/// Targets: the oldest claimable row while the broker is up, and the time
/// back to the steady backlog after the broker returns.
const AGE_TARGET: Duration = Duration::from_secs(2);
const BACK_TARGET: Duration = Duration::from_secs(5);

/// One sample: (since the phase began, backlog, oldest claimable age).
type Sample = (Duration, i64, Duration);

/// Runs the part on each backend and returns its checks.
pub(crate) async fn run() -> Result<Vec<Check>, BoxError> {
    println!(
        "== outage: catch-up after a {}-s broker outage, writers in another process at {RATE} events/s ==",
        OUTAGE.as_secs()
    );
    let mut checks = Vec::new();
    for backend in [Backend::Postgres, Backend::MySql, Backend::Sqlite] {
        checks.extend(one(backend).await?);
    }
    Ok(checks)
}

async fn one(backend: Backend) -> Result<Vec<Check>, BoxError> {
    let name = format!("{backend:?}");
    let test = TestDb::with_schema(backend).await;
    let mut server = NatsServer::start().await.expect("a private nats-server");
    let prefix = format!("outage{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    StreamSpec::new(format!("OUTAGE_{prefix}"), [format!("{prefix}.>")])
        .ensure(
            &async_nats::jetstream::new(
                server
                    .connect()
                    .await
                    .expect("a client of the private nats-server"),
            ),
            txoutbox_core::processor::DEFAULT_LEASE,
        )
        .await?;
    let outbox = Outbox::new(test.db.clone(), fixture::config(&prefix)?);
    let processor = outbox
        .processor(JetStreamPublisher::new(
            server
                .connect()
                .await
                .expect("a client of the private nats-server"),
            "/txoutbox-bench",
        ))
        .build()?
        .spawn();
    let writers = spawn_writers(&test, &prefix).await?;
    tokio::time::sleep(WARM).await;

    let steady = sample(&test.db, backend, STEADY).await?;
    server.kill();
    tokio::time::sleep(OUTAGE).await;
    server.restart().await.expect("nats-server restarted");
    let after = sample(&test.db, backend, AFTER).await?;

    let (_, said) = writers.stopped(WRITERS_STOP).await?;
    let out = said.unwrap_or_default();
    processor.shutdown().await?;

    let mut backlog: Vec<Duration> = steady
        .iter()
        .map(|(_, n, _)| Duration::from_millis(*n as u64))
        .collect();
    let backlog_p50 = percentile(&mut backlog, 0.5).as_millis() as i64;
    let backlog_max = steady.iter().map(|(_, n, _)| *n).max().unwrap_or(0);
    let steady_age = steady.iter().map(|(_, _, a)| *a).max().unwrap_or_default();
    // Back to steady: the first sample after the restart with the backlog
    // at or under the steady phase's largest (and at least 20 rows) and no
    // claimable row older than the target: the catch-up is over (a catch-up
    // walks the aggregates in key order, not by age, so the backlog may be
    // small again while the last rows written during the outage still wait).
    let threshold = backlog_max.max(20);
    let back = after
        .iter()
        .find(|(_, n, age)| *n <= threshold && *age <= AGE_TARGET)
        .map(|(at, _, _)| *at);
    let catch_up_age = after.iter().map(|(_, _, a)| *a).max().unwrap_or_default();
    let settled_age = back.map_or(Duration::MAX, |back| {
        after
            .iter()
            .filter(|(at, _, _)| *at >= back)
            .map(|(_, _, a)| *a)
            .max()
            .unwrap_or_default()
    });
    let peak = after.iter().map(|(_, n, _)| *n).max().unwrap_or(0);
    println!(
        "{name}: steady backlog p50 {backlog_p50}, max {backlog_max} rows, oldest claimable {}; \
         after the restart: peak {peak} rows, back to steady after {}, oldest claimable {} \
         during the catch-up, {} once back; writers: {}",
        ms(steady_age),
        back.map_or("never (in 15 s)".to_owned(), ms),
        ms(catch_up_age),
        if settled_age == Duration::MAX {
            "-".to_owned()
        } else {
            ms(settled_age)
        },
        out.trim()
    );
    let up_age = steady_age.max(settled_age);
    Ok(vec![
        Check::new(
            format!("outage {name}: oldest claimable row while the broker is up"),
            if up_age == Duration::MAX {
                "-".to_owned()
            } else {
                ms(up_age)
            },
            format!("<= {} (2 x poll_interval)", ms(AGE_TARGET)),
            up_age <= AGE_TARGET,
        ),
        Check::new(
            format!("outage {name}: backlog back to steady after the restart"),
            back.map_or("never".to_owned(), ms),
            format!("<= {}", ms(BACK_TARGET)),
            back.is_some_and(|b| b <= BACK_TARGET),
        ),
    ])
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

/// Samples every 100 ms for `length`.
async fn sample(
    db: &DatabaseConnection,
    backend: Backend,
    length: Duration,
) -> Result<Vec<Sample>, BoxError> {
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut ticks = tokio::time::interval(SAMPLE);
    while started.elapsed() < length {
        ticks.tick().await;
        let (backlog, age) = measure(db, backend).await?;
        samples.push((started.elapsed(), backlog, age));
    }
    Ok(samples)
}

/// The backlog and the age of the oldest claimable row, by the database
/// clock.
async fn measure(db: &DatabaseConnection, backend: Backend) -> Result<(i64, Duration), BoxError> {
    let (now, age_ms) = match backend {
        Backend::Postgres => (
            "now()",
            "CAST(EXTRACT(EPOCH FROM (now() - min(m.created_at))) * 1000 AS DOUBLE PRECISION)",
        ),
        Backend::MySql => (
            "UTC_TIMESTAMP(6)",
            "CAST(TIMESTAMPDIFF(MICROSECOND, min(m.created_at), UTC_TIMESTAMP(6)) / 1000 AS DOUBLE)",
        ),
        Backend::Sqlite => (
            "strftime('%Y-%m-%d %H:%M:%f', 'now')",
            "CAST((julianday('now') - julianday(min(m.created_at))) * 86400000.0 AS REAL)",
        ),
    };
    let sql = format!(
        "SELECT {age_ms} AS age_ms, (SELECT count(*) FROM outbox_messages WHERE status = 0) AS backlog \
         FROM outbox_messages m WHERE m.status = 0 AND m.next_attempt_at <= {now} \
         AND (m.lease_expires_at IS NULL OR m.lease_expires_at <= {now}) \
         AND NOT EXISTS (SELECT 1 FROM outbox_messages e WHERE e.aggregate_type = m.aggregate_type \
           AND e.aggregate_id = m.aggregate_id AND e.status <> 1 AND e.sequence < m.sequence)"
    );
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await?
        .ok_or("no row")?;
    let age: Option<f64> = row.try_get("", "age_ms")?;
    let backlog: i64 = row.try_get("", "backlog")?;
    let age = Duration::from_secs_f64(age.unwrap_or(0.0).max(0.0) / 1000.0);
    Ok((backlog, age))
}
