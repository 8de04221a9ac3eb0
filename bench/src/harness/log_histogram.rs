//! Latencies counted in fixed buckets 1% wide: recorded with one atomic
//! add (no lock, no allocation, so a child that measures itself for an hour
//! does not change its own memory by measuring), read and emptied at once.
//! A percentile comes back as its bucket's middle: within 0.5% of the
//! sample it stands for.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bucket `b` holds the values in `[GROWTH^b, GROWTH^(b+1))`.
const GROWTH: f64 = 1.01;
/// 1.01^2,400 ≈ 2.3e10: microseconds up to six hours.
const BUCKETS: usize = 2_400;

/// Counts of values (e.g. microseconds) by 1%-wide bucket.
#[derive(Debug)]
pub(crate) struct LogHistogram {
    buckets: Box<[AtomicU64]>,
}

impl Default for LogHistogram {
    fn default() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// What [`LogHistogram::take`] read.
pub(crate) struct Taken {
    counts: Vec<u64>,
    total: u64,
}

impl LogHistogram {
    /// Counts `value` (values below 1 count as 1; past the last bucket, in
    /// it).
    pub(crate) fn record(&self, value: u64) {
        let bucket = if value <= 1 {
            0
        } else {
            ((value as f64).ln() / GROWTH.ln()) as usize
        };
        self.buckets[bucket.min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
    }

    /// Reads and empties every bucket (a value recorded meanwhile counts in
    /// this window or the next).
    pub(crate) fn take(&self) -> Taken {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.swap(0, Ordering::Relaxed))
            .collect();
        let total = counts.iter().sum();
        Taken { counts, total }
    }
}

impl Taken {
    /// The values counted.
    pub(crate) fn count(&self) -> u64 {
        self.total
    }

    /// The `p` quantile (0..=1), by the nearest rank as
    /// `sorted[round((n - 1) * p)]` would pick it; 0 when nothing was
    /// counted.
    pub(crate) fn percentile(&self, p: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((self.total - 1) as f64 * p.clamp(0.0, 1.0)).round() as u64;
        let mut seen = 0;
        for (bucket, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen > rank {
                return if bucket == 0 {
                    1
                } else {
                    GROWTH.powf(bucket as f64 + 0.5).round() as u64
                };
            }
        }
        u64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_back_within_half_a_percent_and_take_empties_it() {
        let histogram = LogHistogram::default();
        // 1..=10,000 µs once each: p50 5,000, p99 9,900.
        for micros in 1..=10_000u64 {
            histogram.record(micros);
        }
        let taken = histogram.take();
        assert_eq!(taken.count(), 10_000);
        for (p, exact) in [(0.5, 5_000.0), (0.99, 9_900.0)] {
            let got = taken.percentile(p) as f64;
            assert!(
                (got / exact - 1.0).abs() <= 0.011,
                "p{p}: {got} against {exact}"
            );
        }
        assert_eq!(histogram.take().count(), 0, "take empties the buckets");
        assert_eq!(histogram.take().percentile(0.99), 0);
    }
}
