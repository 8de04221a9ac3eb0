//! `crash`: what a processor crash costs (issue 22). A processor process
//! (this binary as `processor-child`, default settings) drains a backlog of
//! 2,000 orders with 10 events each while a writer adds 400 events/s; it is
//! killed (SIGKILL) once it holds at least 1,000 leased rows. A processor
//! with default settings then takes over in this process. Measured: how
//! long until every row the dead process held is published (every one of
//! its aggregates moves again), and what the processor costs the database
//! per second once everything is drained and nothing happens.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use txoutbox_core::processor::ProcessorConfig;
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::Outbox;
use uuid::Uuid;

use crate::children::processor;
use crate::harness::error::BoxError;
use crate::harness::fixture::{self, BenchDb, BenchOrder, BenchStream};
use crate::harness::pgstats;
use crate::harness::record::{StoreCounts, counted_processor};
use crate::harness::report::Check;
use crate::harness::stats::ms;

const ORDERS: usize = 2_000;
const EVENTS_PER_ORDER: usize = 10;
/// Events the writer adds per second meanwhile (one new order each).
const WRITE_RATE: u64 = 400;
/// Leased rows the dead process must hold.
const HELD: i64 = 1_000;
/// Every aggregate of the dead process publishes again within this.
const TARGET: Duration = Duration::from_secs(5);
/// How long the idle processor is watched.
const IDLE: Duration = Duration::from_secs(10);

/// Runs the part and returns its checks.
pub(crate) async fn run() -> Result<Vec<Check>, BoxError> {
    println!("== crash: a processor process killed holding {HELD}+ leased rows ==");
    let bench = BenchDb::create().await?;
    let stream = BenchStream::create().await?;
    let db = bench.connect(8).await?;
    let outbox = Outbox::new(db.clone(), fixture::config(&stream.prefix)?);
    backlog(&outbox).await?;

    let mut child = processor::start(&bench.schema, &stream.prefix).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write(outbox.clone(), Arc::clone(&stop)));
    let held_sql = "SELECT count(*) AS n FROM outbox_messages \
                    WHERE status = 0 AND lease_expires_at > now()";
    let deadline = Instant::now() + Duration::from_secs(60);
    // Three batches of 1,000 in flight at most: killed with two or three,
    // most of them still to publish.
    while pgstats::scalar::<i64>(&db, held_sql, "n").await? < 2 * HELD {
        if Instant::now() > deadline {
            return Err("the processor process never held 2,000 leased rows".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().await?;
    let killed = Instant::now();
    // A statement the dead process had sent may still finish on the server
    // (a completion commits asynchronously): what is leased after that is
    // what it held.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = held_ids(&db).await?;
    if (held.len() as i64) < HELD {
        return Err(format!(
            "the killed process held {} rows once its last statements ended, not {HELD}+",
            held.len()
        )
        .into());
    }
    let aggregates = pgstats::scalar::<i64>(
        &db,
        "SELECT count(DISTINCT aggregate_id) AS n FROM outbox_messages \
         WHERE status = 0 AND lease_expires_at > now()",
        "n",
    )
    .await?;

    // The survivor: default settings, counting what it asks the database.
    let counts = Arc::new(StoreCounts::default());
    let publisher = JetStreamPublisher::new(stream.client.clone(), "/txoutbox-bench-survivor");
    let survivor = counted_processor(&outbox, publisher, Arc::clone(&counts))
        .build()?
        .spawn();
    let ids = held.iter().map(|id| format!("'{id}'")).collect::<Vec<_>>();
    let still_held = format!(
        "SELECT count(*) AS n FROM outbox_messages WHERE status = 0 AND id IN ({})",
        ids.join(", ")
    );
    let mut first_moved = None;
    loop {
        let left = pgstats::scalar::<i64>(&db, &still_held, "n").await?;
        if first_moved.is_none() && left < held.len() as i64 {
            first_moved = Some(killed.elapsed());
        }
        if left == 0 {
            break;
        }
        if killed.elapsed() > Duration::from_secs(120) {
            return Err(
                format!("{left} rows of the dead process still pending after 120 s").into(),
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let recovered = killed.elapsed();
    let lease = ProcessorConfig::default().lease();
    println!(
        "killed holding {} rows of {aggregates} aggregates; the first published again after {}, \
         all after {} (lease {}, poll {})",
        held.len(),
        first_moved.map_or("-".to_owned(), ms),
        ms(recovered),
        ms(lease),
        ms(ProcessorConfig::default().poll_interval()),
    );

    stop.store(true, Ordering::Release);
    let written = writer.await??;
    let pending = "SELECT count(*) AS n FROM outbox_messages WHERE status = 0";
    let drained_by = Instant::now() + Duration::from_secs(120);
    while pgstats::scalar::<i64>(&db, pending, "n").await? > 0 {
        if Instant::now() > drained_by {
            return Err("the survivor did not drain the outbox in 120 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("the writer added {written} events meanwhile; everything is published");

    // Idle: what the processor asks the database when nothing happens.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = counts.snapshot();
    tokio::time::sleep(IDLE).await;
    let after = counts.snapshot();
    let mut idle = Vec::new();
    let mut per_second = 0.0;
    for (a, b) in before.iter().zip(&after) {
        let calls = b.calls - a.calls;
        if calls > 0 {
            let rate = calls as f64 / IDLE.as_secs_f64();
            per_second += rate;
            idle.push(format!("{} {rate:.2}/s", a.name));
        }
    }
    println!(
        "idle processor: {per_second:.2} store calls per second ({})",
        idle.join(", ")
    );
    survivor.shutdown().await?;
    stream.delete().await?;
    db.close().await?;

    Ok(vec![
        Check::new(
            "crash: every aggregate of the dead processor moves again",
            ms(recovered),
            format!("<= {}", ms(TARGET)),
            recovered <= TARGET,
        ),
        Check::new(
            "crash: an idle processor's database statements",
            format!("{per_second:.2}/s"),
            "<= 1.1/s (one claim per poll_interval)",
            per_second <= 1.1,
        ),
    ])
}

/// 2,000 orders with 10 events each, 100 orders per unit of work.
async fn backlog(outbox: &Outbox) -> Result<(), BoxError> {
    for chunk in 0..ORDERS / 100 {
        let mut uow = outbox.begin();
        for n in chunk * 100..(chunk + 1) * 100 {
            let mut order = BenchOrder::place(format!("acc-{n:05}"))?;
            for k in 1..EVENTS_PER_ORDER {
                order.amend(format!("acc-{n:05}-{k}"))?;
            }
            uow.save(&mut order).await?;
        }
        uow.commit().await?;
    }
    Ok(())
}

/// New orders, one event each, at [`WRITE_RATE`] until `stop`; returns how
/// many.
async fn write(outbox: Outbox, stop: Arc<AtomicBool>) -> Result<u64, BoxError> {
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / WRITE_RATE as u32);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut written = 0;
    while !stop.load(Ordering::Acquire) {
        ticks.tick().await;
        let mut order = BenchOrder::place(format!("new-{written:06}"))?;
        outbox.repository::<BenchOrder>().save(&mut order).await?;
        written += 1;
    }
    Ok(written)
}

/// The rows under a live lease.
async fn held_ids(db: &sea_orm::DatabaseConnection) -> Result<Vec<Uuid>, BoxError> {
    use sea_orm::{ConnectionTrait, Statement};
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT id FROM outbox_messages WHERE status = 0 AND lease_expires_at > now()",
        ))
        .await?;
    Ok(rows
        .iter()
        .map(|row| row.try_get::<Uuid>("", "id"))
        .collect::<Result<_, _>>()?)
}
