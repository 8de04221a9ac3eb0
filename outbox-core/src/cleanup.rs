//! [`Cleanup`]: how long settled rows are kept, and how often they are
//! deleted.

use std::time::Duration;

/// How long settled rows (the outbox's published messages, an inbox's
/// applied messages) are kept before they are deleted, and how often the
/// process that owns them looks: the processor for the outbox, the
/// subscriber for its inbox. Both clean up by default, keeping rows for
/// [`DEFAULT_KEEP_FOR`] (7 days); turning it off is a named call on their
/// builders (`without_cleanup`).
///
/// Rows are deleted in bounded batches ([`batch_size`](Self::batch_size)
/// per statement), so no statement holds many locks or runs long. The
/// first pass runs shortly after start; each pass is jittered, so replicas
/// of a service drift apart.
///
/// An inbox row must outlive every repeat of its message: keep inbox rows
/// longer than the longest redelivery span of the consumer and the time the
/// producer may take to re-publish a message (the broker's deduplication
/// window covers re-publishes shorter than it). Days are plenty.
///
/// ```
/// use std::time::Duration;
/// use txoutbox_core::cleanup::Cleanup;
///
/// let cleanup = Cleanup::keep_for(Duration::from_secs(30 * 24 * 3600));
/// assert_eq!(cleanup.every(), Duration::from_secs(3600));
/// let quick = Cleanup::keep_for(Duration::from_secs(10)).check_every(Duration::from_secs(1));
/// assert_eq!(quick.every(), Duration::from_secs(1));
/// assert_eq!(Cleanup::default().older_than(), txoutbox_core::cleanup::DEFAULT_KEEP_FOR);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cleanup {
    keep_for: Duration,
    every: Duration,
    batch_size: u32,
}

/// How long rows are kept by default: 7 days.
pub const DEFAULT_KEEP_FOR: Duration = Duration::from_secs(7 * 24 * 3600);

impl Cleanup {
    /// Deletes rows settled more than `keep_for` ago; looks every tenth of
    /// it, between 1 s and an hour.
    pub fn keep_for(keep_for: Duration) -> Self {
        Self {
            keep_for,
            every: (keep_for / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600)),
            batch_size: 1_000,
        }
    }

    /// Looks every `every` (at least 100 ms) instead.
    pub fn check_every(mut self, every: Duration) -> Self {
        self.every = every.max(Duration::from_millis(100));
        self
    }

    /// Deletes at most `rows` (at least 1) per statement (1,000 by default).
    pub fn batch_size(mut self, rows: u32) -> Self {
        self.batch_size = rows.max(1);
        self
    }

    /// The age past which rows are deleted.
    pub fn older_than(&self) -> Duration {
        self.keep_for
    }

    /// How often the owner looks.
    pub fn every(&self) -> Duration {
        self.every
    }

    /// Rows per statement.
    pub fn rows_per_statement(&self) -> u32 {
        self.batch_size
    }

    /// The pause before the next pass: [`every`](Self::every), jittered
    /// into `[0.75, 1.25]` of it; the first pass comes after a tenth of it.
    pub fn pause(&self, first: bool) -> Duration {
        let base = if first { self.every / 10 } else { self.every };
        let jitter = 0.75 + crate::backoff::unit_random() * 0.5;
        base.mul_f64(jitter)
    }
}

impl Default for Cleanup {
    fn default() -> Self {
        Self::keep_for(DEFAULT_KEEP_FOR)
    }
}

#[cfg(feature = "processor")]
impl Cleanup {
    /// Runs `purge(older_than, rows_per_statement)` on this schedule until
    /// `stop` is cancelled, calling `purged` with each pass's count of
    /// deleted rows (when any); a failed pass is logged (as `what`'s
    /// cleanup) and tried again at the next one. What the processor and a
    /// subscriber run beside their work.
    pub async fn run<F, Fut, E>(
        self,
        what: &str,
        stop: tokio_util::sync::CancellationToken,
        purge: F,
        purged: impl Fn(u64),
    ) where
        F: Fn(Duration, u32) -> Fut,
        Fut: std::future::Future<Output = Result<u64, E>>,
        E: Into<crate::consumer::BoxError>,
    {
        let mut first = true;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(self.pause(first)) => {}
            }
            first = false;
            let purging = purge(self.older_than(), self.rows_per_statement());
            let result = tokio::select! {
                () = stop.cancelled() => return,
                result = purging => result,
            };
            match result {
                Ok(0) => {}
                Ok(rows) => {
                    tracing::debug!(rows, "{what}: rows past their age deleted");
                    purged(rows);
                }
                Err(err) => {
                    let err: crate::consumer::BoxError = err.into();
                    tracing::warn!(
                        error = %crate::ErrorChain(&*err),
                        "{what} cleanup failed; trying again at the next pass"
                    );
                }
            }
        }
    }
}
