//! Offered load: each of `writers` writers starts one transaction per tick
//! of its own schedule, its ticks `writers / rate` apart, and the writers'
//! schedules staggered evenly over one period, so that together they offer
//! one transaction every `1 / rate` (a steady rate; until 23 Nov 2026 all
//! writers ticked at the same instants, offering bursts of `writers`
//! transactions at once).
//!
//! A writer that falls behind (a transaction took longer than its tick)
//! starts the late transactions at once, as requests that arrived meanwhile
//! would be served: the offered rate stays the offered rate, as `pgbench
//! --rate` schedules it, and how late each start was is measured as the
//! *schedule lag*. A system that cannot sustain the rate shows as a growing
//! lag and an achieved rate below the offered one. (Skipping missed ticks
//! instead, as these benchmarks did before 23 Nov 2026, drops offered load
//! whenever one commit outlasts a tick, so it measures how often a commit is
//! slower than the tick rather than the rate the system sustains.)

use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};

/// Writer `writer`'s schedule (of `writers`, together offering `rate`
/// transactions per second), its first tick `writer / rate` after `start`.
pub(crate) fn schedule(start: Instant, writer: usize, writers: usize, rate: u64) -> Interval {
    let period = Duration::from_secs_f64(writers as f64 / rate as f64);
    let offset = Duration::from_secs_f64(writer as f64 / rate as f64);
    let mut ticks = tokio::time::interval_at(start + offset, period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
    ticks
}
