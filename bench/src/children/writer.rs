//! `txoutbox-bench writer-child --url URL [--schema S] --prefix P --rate R
//! [--writers W] [--events N] [--accounts A --hot H --hot-every K]`:
//! writers in a process of their own (no
//! processor there, so the processor learns of their commits only by
//! PostgreSQL `NOTIFY` or by polling). W writers (default 8) save
//! bank-account-like orders through the unit of work at R events/s in
//! total until their standard input closes, or until N events are
//! committed: A accounts (2,000), every K-th event (every fifth) on one of
//! H hot ones (20), each save one event. Prints `ready` when writing
//! starts, `written <events> <failed attempts>` for each `mark` line on its
//! standard input (the endurance part's minutes), and `done <events> (<f>
//! failed attempts, <c> commits confirmed after an error)` at the end.
//!
//! An attempt that fails (a concurrency conflict, or the database away:
//! the soak crashes it) is counted and made again, on the next account,
//! after a pause that doubles from 50 ms to 1 s while attempts keep
//! failing. An event counts as written only once its commit is known to
//! have happened: when the commit itself failed with anything but a
//! conflict (the connection lost mid-commit: committed or not, the writer
//! cannot tell), the writer looks its event up by its unique key once the
//! database answers and counts it if it is there; so every event counted
//! was committed exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sea_orm::{ConnectOptions, ConnectionTrait, Database, DbBackend, Statement};
use tokio::io::AsyncBufReadExt;
use txoutbox_core::backoff::Doubling;
use txoutbox_sea_orm::{Outbox, OutboxError};

use crate::children::protocol;
use crate::harness::error::BoxError;
use crate::harness::fixture::{self, BenchOrder};

/// The part's name on the command line.
pub(crate) const PART: &str = "writer-child";

/// Accounts written to, how many of them are hot, and which share of the
/// events goes to the hot ones (one in `HOT_EVERY`), by default.
const ACCOUNTS: u64 = 2_000;
const HOT: u64 = 20;
const HOT_EVERY: u64 = 5;
/// Concurrent writers by default.
const WRITERS: u64 = 8;
/// The pause after a failed attempt: doubling from the first to the last.
const PAUSE: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(1));
/// Waiting for a connection gives up after this (the database away).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(1);

/// What one writer counted.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    /// Events committed.
    written: u64,
    /// Attempts that committed nothing.
    failed: u64,
    /// Commits that failed on the client's side and were found committed.
    confirmed: u64,
}

/// Runs the child with `args` (what follows the part's name).
pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let value = |flag: &str| fixture::flag_value(args, PART, flag);
    let mut options = ConnectOptions::new(value("--url")?);
    if let Ok(schema) = value("--schema") {
        options.set_schema_search_path(schema.to_owned());
    }
    let writers: u64 = value("--writers").map_or(Ok(WRITERS), str::parse)?;
    let events: u64 = value("--events").map_or(Ok(u64::MAX), str::parse)?;
    options
        .max_connections(writers as u32 + 2)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .sqlx_logging(false);
    let db = Database::connect(options).await?;
    let outbox = Outbox::new(db, fixture::config(value("--prefix")?)?);
    let rate: u64 = value("--rate")?.parse()?;
    let spread = Spread {
        accounts: value("--accounts").map_or(Ok(ACCOUNTS), str::parse)?,
        hot: value("--hot").map_or(Ok(HOT), str::parse)?,
        hot_every: value("--hot-every").map_or(Ok(HOT_EVERY), str::parse)?,
    };

    let stop = Arc::new(AtomicBool::new(false));
    // Events taken by a writer so far (a failed save keeps its own).
    let taken = Arc::new(AtomicU64::new(0));
    // Events committed and failed attempts so far, for `mark`.
    let progress = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let mut tasks = Vec::new();
    for writer in 0..writers {
        let (outbox, stop, taken) = (outbox.clone(), stop.clone(), taken.clone());
        let progress = progress.clone();
        tasks.push(tokio::spawn(async move {
            let every = Duration::from_secs(1) * writers as u32 / rate.max(1) as u32;
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut pause = Doubling::new(PAUSE.0, PAUSE.1);
            let mut counts = Counts::default();
            let mut n = writer;
            let mut holds_one = false;
            while !stop.load(Ordering::Acquire) {
                ticks.tick().await;
                if !holds_one {
                    if taken.fetch_add(1, Ordering::AcqRel) >= events {
                        break;
                    }
                    holds_one = true;
                }
                let account = spread.account(n);
                n += writers;
                let key = format!("acc-{account:05}-{}", uuid::Uuid::now_v7());
                let committed = match save(&outbox, account, &key).await {
                    Attempt::Committed => true,
                    Attempt::Failed => false,
                    Attempt::Unknown => {
                        let found = is_written(&outbox, &key, &stop).await;
                        counts.confirmed += u64::from(found);
                        found
                    }
                };
                if committed {
                    counts.written += 1;
                    progress.0.fetch_add(1, Ordering::Relaxed);
                    holds_one = false;
                    pause.reset();
                } else {
                    counts.failed += 1;
                    progress.1.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(pause.next_pause()).await;
                }
            }
            counts
        }));
    }
    protocol::ready()?;
    // Standard input closing stops the writers early; `mark` asks for the
    // counts so far.
    let stopper = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut input = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = input.next_line().await {
                if line.trim() == "mark" {
                    let (written, failed) = (&progress.0, &progress.1);
                    let _ = protocol::say(&format!(
                        "written {} {}",
                        written.load(Ordering::Relaxed),
                        failed.load(Ordering::Relaxed)
                    ));
                }
            }
            stop.store(true, Ordering::Release);
        })
    };
    let mut all = Counts::default();
    for task in tasks {
        let counts = task.await?;
        all.written += counts.written;
        all.failed += counts.failed;
        all.confirmed += counts.confirmed;
    }
    stopper.abort();
    println!(
        "done {} ({} failed attempts, {} commits confirmed after an error)",
        all.written, all.failed, all.confirmed
    );
    Ok(())
}

/// Which account each event goes to.
#[derive(Debug, Clone, Copy)]
struct Spread {
    accounts: u64,
    hot: u64,
    /// One event in this many goes to a hot account.
    hot_every: u64,
}

impl Spread {
    /// The account of a writer's `n`-th event: every `hot_every`-th on one
    /// of the first `hot` accounts, the others spread over all of them.
    fn account(&self, n: u64) -> u64 {
        let every = self.hot_every.max(1);
        if n.is_multiple_of(every) {
            n / every % self.hot.max(1)
        } else {
            (n * 7_919) % self.accounts.max(1)
        }
    }
}

/// How an attempt ended.
enum Attempt {
    Committed,
    /// Nothing committed: it failed before its commit, or its commit was
    /// refused (a conflict).
    Failed,
    /// Its commit failed on the way (the connection lost): committed or
    /// not.
    Unknown,
}

/// One event on `account`, keyed `key`: placed if new, else amended.
async fn save(outbox: &Outbox, account: u64, key: &str) -> Attempt {
    let id = format!("acc-{account:05}");
    let prepared = async {
        let mut uow = outbox.begin();
        let mut order = match uow.load::<BenchOrder>(id.clone()).await? {
            Some(mut order) => {
                order.amend(key.to_owned())?;
                order
            }
            None => BenchOrder::place_keyed(id, key.to_owned())?,
        };
        uow.save(&mut order).await?;
        Ok::<_, OutboxError>(uow)
    };
    match prepared.await {
        Err(_) => Attempt::Failed,
        Ok(uow) => match uow.commit().await {
            Ok(_) => Attempt::Committed,
            Err(err) if err.is_retryable() => Attempt::Failed,
            Err(_) => Attempt::Unknown,
        },
    }
}

/// Whether the event keyed `key` is in the outbox, asked until the
/// database answers (false if the writers are stopped first).
async fn is_written(outbox: &Outbox, key: &str, stop: &AtomicBool) -> bool {
    let sql = "SELECT count(*) AS n FROM outbox_messages WHERE payload->>'key' = $1";
    let mut pause = Doubling::new(PAUSE.0, PAUSE.1);
    while !stop.load(Ordering::Acquire) {
        let statement = Statement::from_sql_and_values(DbBackend::Postgres, sql, [key.into()]);
        if let Ok(Some(row)) = outbox.db().query_one_raw(statement).await
            && let Ok(n) = row.try_get::<i64>("", "n")
        {
            return n > 0;
        }
        tokio::time::sleep(pause.next_pause()).await;
    }
    false
}
