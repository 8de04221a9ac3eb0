//! Writer throughput with and without waking other processes: 8 writers
//! offering 5,000 one-event transactions per second in total, for each of
//! - no wake-ups;
//! - the outbox's wake-up: one coalesced `NOTIFY` at most every millisecond,
//!   sent after commit by a background task;
//! - the trap: `pg_notify` inside every writer transaction.

use crate::harness::error::BoxError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DbBackend, Statement};
use txoutbox_fixtures::orders::Order;
use txoutbox_fixtures::{Backend, TestDb};
use txoutbox_sea_orm::{Outbox, OutboxConfig};

use crate::harness::offered;
use crate::harness::stats::{ms, percentile};

const WRITERS: usize = 8;
const OFFERED_PER_SEC: u64 = 5000;
const RUN: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    Coalesced,
    InTransaction,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Off => "no wake-ups",
            Mode::Coalesced => "coalesced NOTIFY after commit (the outbox)",
            Mode::InTransaction => "pg_notify inside every transaction (the trap)",
        }
    }
}

pub(crate) async fn run() -> Result<(), BoxError> {
    println!(
        "== writers on PostgreSQL: {WRITERS} writers offering {OFFERED_PER_SEC} one-event transactions/s for {}s ==",
        RUN.as_secs()
    );
    let mut achieved = Vec::new();
    for mode in [Mode::Off, Mode::Coalesced, Mode::InTransaction] {
        let Measured {
            rate,
            mut latencies,
            mut lags,
        } = measure(mode).await?;
        println!(
            "{:<48} {:>7.0} tx/s ({:>5.1}% of offered)  commit p50 {}  p99 {}  schedule lag p50 {}  p99 {}",
            mode.label(),
            rate,
            100.0 * rate / OFFERED_PER_SEC as f64,
            ms(percentile(&mut latencies, 0.5)),
            ms(percentile(&mut latencies, 0.99)),
            ms(percentile(&mut lags, 0.5)),
            ms(percentile(&mut lags, 0.99)),
        );
        achieved.push(rate);
    }
    println!(
        "coalesced wake-ups keep {:.1}% of the writer throughput without wake-ups",
        100.0 * achieved[1] / achieved[0]
    );
    Ok(())
}

async fn measure(mode: Mode) -> Result<Measured, BoxError> {
    let test = TestDb::with_schema(Backend::Postgres).await;
    let config = match mode {
        Mode::Coalesced => OutboxConfig::default(),
        _ => OutboxConfig::default().without_notify(),
    };
    let outbox = Outbox::new(test.connect_again().await, config);
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + RUN;
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        let (outbox, done) = (outbox.clone(), Arc::clone(&done));
        tasks.push(tokio::spawn(async move {
            let mut ticks = offered::schedule(start.into(), writer, WRITERS, OFFERED_PER_SEC);
            let mut latencies = Vec::new();
            let mut lags = Vec::new();
            let mut n = 0u64;
            loop {
                let tick = ticks.tick().await;
                if Instant::now() >= deadline {
                    return Ok::<_, BoxError>((latencies, lags));
                }
                n += 1;
                let mut order = Order::place(format!("w{writer}-{n}"), 100)?;
                let began = Instant::now();
                let mut uow = outbox.begin();
                uow.save(&mut order).await?;
                if mode == Mode::InTransaction {
                    uow.connection()
                        .await?
                        .execute_raw(Statement::from_string(
                            DbBackend::Postgres,
                            "SELECT pg_notify('txoutbox_bench', '')",
                        ))
                        .await?;
                }
                uow.commit().await?;
                if Instant::now() < deadline {
                    latencies.push(began.elapsed());
                    lags.push(began - tick.into_std());
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let (mut latencies, mut lags) = (Vec::new(), Vec::new());
    for task in tasks {
        let (commits, lag) = task.await??;
        latencies.extend(commits);
        lags.extend(lag);
    }
    let rate = done.load(Ordering::Relaxed) as f64 / RUN.as_secs_f64();
    drop(outbox);
    drop(test);
    Ok(Measured {
        rate,
        latencies,
        lags,
    })
}

/// Transactions committed per second in the run, their commit latencies
/// and their schedule lags (see [`offered`]).
struct Measured {
    rate: f64,
    latencies: Vec<Duration>,
    lags: Vec<Duration>,
}
