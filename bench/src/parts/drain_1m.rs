//! The parts that drain a backlog with one processor:
//! - `drain`: 200,000 rows with the default settings, against the targets
//!   and both ceilings of the same run;
//! - `drain-tune`: the same for several batch sizes and batches in flight;
//! - `drain-1m`: 1,000,000 rows, `VmRSS` sampled every second (is memory
//!   flat?).

use std::time::Duration;

use crate::harness::error::BoxError;
use crate::harness::memory::mib;
use crate::harness::report::{Check, thousands};
use crate::parts::drain::{Drain, Settings, drain};
use crate::parts::jetstream::JetStreamCeiling;
use crate::parts::naive::{self, NaiveRelay};

/// Rows of the `drain` and `drain-tune` backlogs.
const ROWS: u64 = naive::ROWS;
/// Rows of the `drain-1m` backlog.
const ROWS_1M: u64 = 1_000_000;
/// Drain rate target, events per second.
const TARGET_RATE: f64 = 28_000.0;
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

/// `drain-tune`: several settings on fresh 200,000-row backlogs.
pub(crate) async fn tune() -> Result<(), BoxError> {
    println!(
        "== drain-tune: {} pending rows per setting ==",
        thousands(ROWS as f64)
    );
    let settings = [
        // (batch, batches in flight, max_in_flight, Retention::Delete, processors)
        (500, 1, 2048, false, 1),
        (500, 2, 2048, false, 1),
        (500, 3, 2048, false, 1),
        (500, 4, 2048, false, 1),
        (1000, 2, 2048, false, 1),
        (1000, 3, 2048, false, 1),
        (1000, 3, 4096, false, 1),
        (1000, 4, 4096, false, 1),
        (2000, 2, 4096, false, 1),
        (500, 3, 2048, true, 1),
        (1000, 3, 4096, true, 1),
        (500, 3, 2048, false, 2),
    ];
    for (batch_size, batches_in_flight, max_in_flight, delete_published, processors) in settings {
        let drained = drain(
            Settings {
                batch_size,
                batches_in_flight,
                max_in_flight,
                delete_published,
                processors,
            },
            ROWS,
            ROWS,
            Duration::from_millis(100),
        )
        .await?;
        drained.print();
        println!("   {}", drained.cpu);
    }
    Ok(())
}

/// `drain-1m`: memory while 1,000,000 rows drain.
pub(crate) async fn one_million() -> Result<Vec<Check>, BoxError> {
    println!(
        "== drain-1m: {} pending rows, one processor, default settings, VmRSS every second ==",
        thousands(ROWS_1M as f64)
    );
    let drained = drain(
        Settings::default(),
        ROWS_1M,
        ROWS_1M,
        Duration::from_secs(1),
    )
    .await?;
    drained.print();
    drained.print_details();
    let rss: Vec<u64> = drained.child.samples.iter().map(|(_, kib)| *kib).collect();
    let line: Vec<String> = drained
        .child
        .samples
        .iter()
        .map(|(at, kib)| format!("{:.0}s {:.0}", at.as_secs_f64(), *kib as f64 / 1024.0))
        .collect();
    println!("   VmRSS samples (MiB): {}", line.join(", "));
    let (first, last) = (
        rss.first().copied().unwrap_or(0),
        rss.last().copied().unwrap_or(0),
    );
    let (min, max) = (
        rss.iter().copied().min().unwrap_or(0),
        rss.iter().copied().max().unwrap_or(0),
    );
    // Flat: what the second half of the drain holds is no more than what the
    // first half held (allocator noise of 10% or 8 MiB allowed), so memory
    // does not grow with the rows drained.
    let half = rss.len() / 2;
    let first_half = rss[..half.max(1).min(rss.len())]
        .iter()
        .copied()
        .max()
        .unwrap_or(0);
    let second_half = rss[half..].iter().copied().max().unwrap_or(0);
    let allowed = first_half + (first_half / 10).max(8 * 1024);
    println!(
        "   VmRSS first {} last {} min {} max {}; max of the first half {} vs second half {}",
        mib(first),
        mib(last),
        mib(min),
        mib(max),
        mib(first_half),
        mib(second_half)
    );
    Ok(vec![
        Check::new(
            "memory flat while 1,000,000 rows drain",
            format!("{} → {} (max {})", mib(first), mib(last), mib(max)),
            "second half max <= first half max + max(10%, 8 MiB)",
            second_half <= allowed,
        ),
        Check::new(
            "drain rate, 1,000,000 rows",
            format!("{} events/s", thousands(drained.rate())),
            format!(">= {} events/s", thousands(TARGET_RATE)),
            drained.rate() >= TARGET_RATE,
        ),
    ])
}
