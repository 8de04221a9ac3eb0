//! The processor's [`HealthProbe`]: whether it makes progress, for a
//! service's health endpoint.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::store::OutboxStats;

/// The limits a [`HealthProbe::check`] holds a processor to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthThresholds {
    max_claim_gap: Duration,
    max_oldest_pending_age: Duration,
}

impl Default for HealthThresholds {
    /// Claims at most 10 s apart; no due message that nothing holds back
    /// waiting 60 s or more.
    fn default() -> Self {
        Self {
            max_claim_gap: Duration::from_secs(10),
            max_oldest_pending_age: Duration::from_secs(60),
        }
    }
}

impl HealthThresholds {
    /// The longest time since the last successful claim (default 10 s).
    /// Keep it above the processor's `poll_interval` (1 s by default).
    pub fn max_claim_gap(mut self, gap: Duration) -> Self {
        self.max_claim_gap = gap;
        self
    }

    /// The longest a due message that nothing holds back may wait
    /// (default 60 s): see [`OutboxStats::oldest_pending_age`] (delayed
    /// messages and blocked aggregates do not count).
    pub fn max_oldest_pending_age(mut self, age: Duration) -> Self {
        self.max_oldest_pending_age = age;
        self
    }
}

/// What a [`HealthProbe::check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// No problem.
    pub healthy: bool,
    /// The processor's task is running.
    pub running: bool,
    /// Time since the last successful claim (since the processor started,
    /// if it has not claimed yet).
    pub since_last_claim: Duration,
    /// How long the oldest due message that nothing holds back had waited
    /// at the last backlog refresh (see
    /// [`OutboxStats::oldest_pending_age`]), if there was one (none without
    /// `stats_interval`) and such a message was pending.
    pub oldest_pending_age: Option<Duration>,
    /// Pending messages recorded with a delay and not due yet, at the last
    /// backlog refresh: reported, never a problem.
    pub delayed: u64,
    /// Aggregates whose messages wait behind a dead message, at the last
    /// backlog refresh: reported, never a problem (the dead count and its
    /// alert are where an operator sees them).
    pub blocked_aggregates: u64,
    /// Messages the broker acknowledged whose completion the database has
    /// not recorded yet (it was away when their batch settled): the
    /// processor keeps them in memory, records them first when the
    /// database answers, and claims nothing meanwhile.
    pub unrecorded: usize,
    /// Why it is not healthy, one line each.
    pub problems: Vec<String>,
}

/// A processor's progress, shared with the processor; cheap to clone and to
/// [`check`](Self::check) (no I/O). From
/// [`Processor::health`](super::Processor::health) or
/// [`ProcessorHandle::health`](super::ProcessorHandle::health).
/// For a service's health endpoint (`/health` answering 200 or 503) and
/// its orchestrator's liveness probe.
///
/// A processor is **healthy** while it runs, its claims succeed (the last
/// one ended no longer than [`HealthThresholds::max_claim_gap`] ago; an idle
/// processor claims at least once per `poll_interval`), and the oldest due
/// message that nothing holds back, as of the last backlog refresh
/// (`stats_interval`), has waited less than
/// [`HealthThresholds::max_oldest_pending_age`]. It is **stalled** when the
/// database fails its claims, the broker has been away long enough that it
/// stopped claiming, its batches hang, or due messages wait longer than the
/// threshold (more pending than it keeps up with, a message failing its
/// retries). A message recorded with a delay, and the messages waiting
/// behind a dead message of their aggregate, are counted
/// ([`Health::delayed`], [`Health::blocked_aggregates`]) but never make it
/// unhealthy: dead messages have their own count and alert.
///
/// ```no_run
/// # use txoutbox_core::{OutboxStore, Publisher};
/// # async fn run(store: impl OutboxStore + 'static, publisher: impl Publisher) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use txoutbox_core::processor::{HealthThresholds, Processor};
///
/// let processor = Processor::builder(store, publisher).build()?.spawn();
/// let probe = processor.health();
/// let thresholds = HealthThresholds::default().max_oldest_pending_age(Duration::from_secs(30));
/// let health = probe.check(&thresholds);
/// let status = if health.healthy { 200 } else { 503 };
/// # let _ = status; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct HealthProbe {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    created: Instant,
    running: AtomicBool,
    started: AtomicBool,
    /// See [`Health::unrecorded`].
    unrecorded: AtomicUsize,
    progress: Mutex<Progress>,
}

#[derive(Debug, Default)]
struct Progress {
    started_at: Option<Instant>,
    last_claim: Option<Instant>,
    oldest_pending_age: Option<Duration>,
    delayed: u64,
    blocked_aggregates: u64,
    /// Why the processor stopped on its own.
    failure: Option<String>,
}

impl Default for HealthProbe {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                created: Instant::now(),
                running: AtomicBool::new(false),
                started: AtomicBool::new(false),
                unrecorded: AtomicUsize::new(0),
                progress: Mutex::new(Progress::default()),
            }),
        }
    }
}

impl HealthProbe {
    /// Checks the processor against `thresholds`.
    pub fn check(&self, thresholds: &HealthThresholds) -> Health {
        let now = Instant::now();
        let running = self.inner.running.load(Ordering::Acquire);
        let started = self.inner.started.load(Ordering::Acquire);
        let (since_last_claim, oldest_pending_age, delayed, blocked_aggregates, failure) = {
            let progress = self.progress();
            let since = progress
                .last_claim
                .or(progress.started_at)
                .unwrap_or(self.inner.created);
            (
                now.saturating_duration_since(since),
                progress.oldest_pending_age,
                progress.delayed,
                progress.blocked_aggregates,
                progress.failure.clone(),
            )
        };
        let mut problems = Vec::new();
        if let Some(failure) = failure {
            problems.push(failure);
        } else if !running {
            problems.push(if started {
                "the processor has stopped".to_owned()
            } else {
                "the processor has not started".to_owned()
            });
        } else if since_last_claim > thresholds.max_claim_gap {
            problems.push(format!(
                "no successful claim for {:.1} s (limit {:.1} s): the database or the broker is \
                 failing, or batches hang",
                since_last_claim.as_secs_f64(),
                thresholds.max_claim_gap.as_secs_f64()
            ));
        }
        if let Some(age) = oldest_pending_age
            && age > thresholds.max_oldest_pending_age
        {
            problems.push(format!(
                "the oldest pending message that is due has waited {:.1} s (limit {:.1} s)",
                age.as_secs_f64(),
                thresholds.max_oldest_pending_age.as_secs_f64()
            ));
        }
        Health {
            healthy: problems.is_empty(),
            running,
            since_last_claim,
            oldest_pending_age,
            delayed,
            blocked_aggregates,
            unrecorded: self.inner.unrecorded.load(Ordering::Acquire),
            problems,
        }
    }

    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        // A panic while holding the lock leaves plain data: keep using it.
        self.inner
            .progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The processor's task started; returns a guard that marks it stopped
    /// when dropped, however the task ends.
    pub(super) fn started(&self) -> RunningGuard {
        self.progress().started_at = Some(Instant::now());
        self.inner.started.store(true, Ordering::Release);
        self.inner.running.store(true, Ordering::Release);
        RunningGuard(self.clone())
    }

    /// The processor stopped on its own, for `reason`.
    pub(super) fn failed(&self, reason: String) {
        self.progress().failure = Some(reason);
    }

    /// A claim (or a hand-over) succeeded.
    pub(super) fn claimed(&self) {
        self.progress().last_claim = Some(Instant::now());
    }

    /// `publishes` wait to be recorded (see [`Health::unrecorded`]).
    pub(super) fn unrecorded(&self, publishes: usize) {
        self.inner.unrecorded.store(publishes, Ordering::Release);
    }

    /// The backlog was refreshed.
    pub(super) fn backlog(&self, stats: &OutboxStats) {
        let mut progress = self.progress();
        progress.oldest_pending_age = stats.oldest_pending_age;
        progress.delayed = stats.delayed;
        progress.blocked_aggregates = stats.blocked_aggregates;
    }
}

/// Marks the processor stopped when its task ends.
pub(super) struct RunningGuard(HealthProbe);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.inner.running.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backlog(age_secs: Option<u64>, delayed: u64, blocked_aggregates: u64) -> OutboxStats {
        OutboxStats {
            oldest_pending_age: age_secs.map(Duration::from_secs),
            delayed,
            blocked_aggregates,
            ..OutboxStats::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn claims_and_backlog_decide() {
        let probe = HealthProbe::default();
        let limits = HealthThresholds::default()
            .max_claim_gap(Duration::from_secs(5))
            .max_oldest_pending_age(Duration::from_secs(30));
        assert!(!probe.check(&limits).healthy, "not started");
        let guard = probe.started();
        assert!(probe.check(&limits).healthy);
        tokio::time::advance(Duration::from_secs(6)).await;
        let stalled = probe.check(&limits);
        assert!(!stalled.healthy && stalled.problems[0].contains("no successful claim"));
        probe.claimed();
        assert!(probe.check(&limits).healthy);
        probe.backlog(&backlog(Some(31), 0, 0));
        let old = probe.check(&limits);
        assert!(
            !old.healthy && old.problems[0].contains("oldest pending message that is due"),
            "{old:?}"
        );
        probe.backlog(&backlog(None, 0, 0));
        assert!(probe.check(&limits).healthy);
        // Delayed messages and blocked aggregates are reported, not problems.
        probe.backlog(&backlog(Some(3), 4, 2));
        let waiting = probe.check(&limits);
        assert!(waiting.healthy, "{waiting:?}");
        assert_eq!((waiting.delayed, waiting.blocked_aggregates), (4, 2));
        drop(guard);
        assert_eq!(
            probe.check(&limits).problems,
            ["the processor has stopped".to_owned()]
        );
    }
}
