//! The clock the in-memory store decides by: leases, backoffs, delays.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// Wall-clock time plus an offset that only a test moves.
///
/// The in-memory store reads every time-dependent decision (is a lease
/// live, is a retry due, may a delayed message go) from its clock, as the
/// SQL stores read the database's. [`advance`](TestClock::advance) jumps
/// over a backoff or a lease in no time; clones share the offset.
///
/// ```
/// use std::time::Duration;
/// use txoutbox_testing::TestClock;
///
/// let clock = TestClock::new();
/// let before = clock.now();
/// clock.advance(Duration::from_secs(3600));
/// assert!(clock.now() - before >= chrono::Duration::hours(1));
/// ```
#[derive(Debug, Clone, Default)]
pub struct TestClock {
    offset: Arc<Mutex<chrono::Duration>>,
}

impl TestClock {
    /// A clock at the wall-clock time.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current time by this clock.
    pub fn now(&self) -> DateTime<Utc> {
        let offset = *self.offset.lock().unwrap_or_else(PoisonError::into_inner);
        Utc::now()
            .checked_add_signed(offset)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// Moves the clock (and every clone of it) forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        let mut offset = self.offset.lock().unwrap_or_else(PoisonError::into_inner);
        *offset = offset.checked_add(&by).unwrap_or(chrono::Duration::MAX);
    }
}
