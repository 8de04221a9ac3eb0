//! `drain-1m`: 1,000,000 rows drained by one processor with the default
//! settings, `VmRSS` sampled every second (is memory flat?).

use std::time::Duration;

use crate::children::drain::Settings;
use crate::harness::error::BoxError;
use crate::harness::memory::mib;
use crate::harness::report::{Check, thousands};
use crate::parts::drain::{TARGET_RATE, drain};

/// Rows of the `drain-1m` backlog.
const ROWS_1M: u64 = 1_000_000;

/// `drain-1m`: memory while 1,000,000 rows drain.
pub(crate) async fn run() -> Result<Vec<Check>, BoxError> {
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
