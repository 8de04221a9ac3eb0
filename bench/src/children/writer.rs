//! `txoutbox-bench writer-child --url URL [--schema S] --prefix P --rate R
//! [--writers W] [--events N]`: writers in a process of their own (no
//! processor there, so the processor learns of their commits only by
//! PostgreSQL `NOTIFY` or by polling). W writers (default 8) save
//! bank-account-like orders through the unit of work at R events/s in
//! total until their standard input closes, or until N events are
//! committed: 2,000 accounts, a fifth of the events on 20 hot ones, each
//! save one event. Prints `ready` when writing starts and `done <events>`
//! at the end.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sea_orm::{ConnectOptions, Database};
use tokio::io::AsyncBufReadExt;
use txoutbox_sea_orm::Outbox;

use crate::children::protocol;
use crate::harness::error::BoxError;
use crate::harness::fixture::{self, BenchOrder};

/// The part's name on the command line.
pub(crate) const PART: &str = "writer-child";

/// Accounts written to, and how many of them are hot.
const ACCOUNTS: u64 = 2_000;
const HOT: u64 = 20;
/// Concurrent writers by default.
const WRITERS: u64 = 8;

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
        .sqlx_logging(false);
    let db = Database::connect(options).await?;
    let outbox = Outbox::new(db, fixture::config(value("--prefix")?)?);
    let rate: u64 = value("--rate")?.parse()?;

    let stop = Arc::new(AtomicBool::new(false));
    // Events taken by a writer so far (a failed save keeps its own).
    let taken = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for writer in 0..writers {
        let (outbox, stop, taken) = (outbox.clone(), stop.clone(), taken.clone());
        tasks.push(tokio::spawn(async move {
            let every = Duration::from_secs(1) * writers as u32 / rate.max(1) as u32;
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut written = 0_u64;
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
                // Every fifth event on a hot account.
                let account = if n % 5 == 0 {
                    n / 5 % HOT
                } else {
                    (n * 7_919) % ACCOUNTS
                };
                n += writers;
                if save(&outbox, account).await.is_ok() {
                    written += 1;
                    holds_one = false;
                }
            }
            written
        }));
    }
    protocol::ready()?;
    // Standard input closing stops the writers early.
    let stopper = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut input = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(_)) = input.next_line().await {}
            stop.store(true, Ordering::Release);
        })
    };
    let mut written = 0;
    for task in tasks {
        written += task.await?;
    }
    stopper.abort();
    println!("done {written}");
    Ok(())
}

/// One event on `account`: placed if new, else amended (a concurrency
/// conflict with another writer of the same account is skipped).
async fn save(outbox: &Outbox, account: u64) -> Result<(), BoxError> {
    let id = format!("acc-{account:05}");
    let mut uow = outbox.begin();
    let mut order = match uow.load::<BenchOrder>(id.clone()).await? {
        Some(mut order) => {
            order.amend(format!("{id}-{}", uuid::Uuid::now_v7()))?;
            order
        }
        None => BenchOrder::place(id)?,
    };
    uow.save(&mut order).await?;
    uow.commit().await?;
    Ok(())
}
