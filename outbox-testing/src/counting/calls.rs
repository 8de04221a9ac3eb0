//! [`StoreCalls`]: what a [`CountingStore`](super::CountingStore) saw, by
//! method.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Calls, rows and time of one store method.
#[derive(Debug, Default)]
pub struct CallCount {
    calls: AtomicU64,
    rows: AtomicU64,
    micros: AtomicU64,
}

impl CallCount {
    /// Counts one call that returned, touching `rows` rows, after `took`.
    pub(crate) fn record(&self, rows: u64, took: Duration) {
        self.rows.fetch_add(rows, Ordering::AcqRel);
        self.micros.fetch_add(
            u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            Ordering::AcqRel,
        );
        self.calls.fetch_add(1, Ordering::AcqRel);
    }

    /// Calls that have returned so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Acquire)
    }

    /// Rows claimed or settled so far (messages of the claimed batches;
    /// rows a settlement applied to).
    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Acquire)
    }

    /// Time spent in the calls (summed over concurrent calls).
    pub fn total(&self) -> Duration {
        Duration::from_micros(self.micros.load(Ordering::Acquire))
    }
}

/// One store method's figures at one moment, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFigures {
    /// The method (`claim`, `complete`, …).
    pub name: String,
    /// Calls that had returned.
    pub calls: u64,
    /// Rows claimed or settled.
    pub rows: u64,
    /// Time spent in the calls (summed over concurrent calls).
    pub total: Duration,
}

/// What a [`CountingStore`](super::CountingStore) saw, by
/// [`OutboxStore`](txoutbox_core::OutboxStore) method. Share it (in an
/// `Arc`) to read the counts while the processor runs.
#[derive(Debug, Default)]
pub struct StoreCalls {
    /// The duration of every ordinary claim, in order.
    claim_times: Mutex<Vec<Duration>>,
    /// Ordinary claims (those that search the table).
    pub claim: CallCount,
    /// Claims by id.
    pub claim_ids: CallCount,
    /// Completions.
    pub complete: CallCount,
    /// Recorded failures.
    pub fail: CallCount,
    /// Releases.
    pub release: CallCount,
    /// Lease renewals.
    pub renew: CallCount,
    /// Statistics.
    pub stats: CallCount,
}

impl StoreCalls {
    /// Every method's figures so far.
    pub fn snapshot(&self) -> Vec<CallFigures> {
        self.methods()
            .iter()
            .map(|(name, count)| CallFigures {
                name: (*name).to_owned(),
                calls: count.calls(),
                rows: count.rows(),
                total: count.total(),
            })
            .collect()
    }

    /// Mean duration of ordinary claims in each tenth of the claims, in
    /// order (empty under ten claims): does claiming slow down as a backlog
    /// drains?
    pub fn claim_deciles(&self) -> Vec<Duration> {
        let times = self
            .claim_times
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if times.len() < 10 {
            return Vec::new();
        }
        (0..10)
            .map(|decile| {
                let part = &times[decile * times.len() / 10..(decile + 1) * times.len() / 10];
                part.iter().sum::<Duration>() / u32::try_from(part.len().max(1)).unwrap_or(1)
            })
            .collect()
    }

    /// Each method with its name.
    pub fn methods(&self) -> [(&'static str, &CallCount); 7] {
        [
            ("claim", &self.claim),
            ("claim_ids", &self.claim_ids),
            ("complete", &self.complete),
            ("fail", &self.fail),
            ("release", &self.release),
            ("renew", &self.renew),
            ("stats", &self.stats),
        ]
    }

    /// Records the duration of an ordinary claim.
    pub(crate) fn claim_took(&self, took: Duration) {
        self.claim_times
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(took);
    }
}
