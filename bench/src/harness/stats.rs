//! Percentiles of measured durations.

use std::time::Duration;

/// The `p`-th percentile (0.0..=1.0) of `samples`, which it sorts.
pub(crate) fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let rank = ((samples.len() - 1) as f64 * p).round() as usize;
    samples[rank.min(samples.len() - 1)]
}

/// Milliseconds with two decimals.
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}
