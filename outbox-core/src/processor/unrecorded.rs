//! What the broker acknowledged but the database has not recorded yet.
//!
//! A batch settles with three statements (complete, fail, release). When
//! the database does not answer them, the batch leaves its settlement here
//! and ends; the processor keeps it in memory, claims nothing more, and
//! records it first when the database answers again. So a publish whose
//! completion could not be written is recorded late rather than published
//! again after the stream's duplicate window; only a processor that dies
//! meanwhile leaves its messages to be published again (see the guide's
//! chapter on guarantees).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::health::HealthProbe;
use super::metrics;
use super::sync::locked;
use crate::id::{LeaseToken, MessageId};
use crate::store::{Failure, LeaseOutcome, OutboxStore, Published, RetryPolicy, StoreError};

/// One batch's outcome, as far as it is not recorded yet.
#[derive(Debug)]
pub(super) struct Settlement {
    /// The batch's lease: every statement is fenced by it.
    pub(super) token: LeaseToken,
    /// Acknowledged by the broker: message id and stream sequence.
    pub(super) published: Vec<Published>,
    /// Rejected by the broker (each spends an attempt).
    pub(super) failures: Vec<Failure>,
    /// Given back unpublished.
    pub(super) released: Vec<MessageId>,
    /// Recorded once already, perhaps lost (see [`REPLAY`]): a completion
    /// that finds its messages published is no news.
    replay: bool,
}

impl Settlement {
    /// Nothing to record yet, under `token`.
    pub(super) fn new(token: LeaseToken) -> Self {
        Self {
            token,
            published: Vec::new(),
            failures: Vec::new(),
            released: Vec::new(),
            replay: false,
        }
    }

    /// Nothing left to record.
    fn is_empty(&self) -> bool {
        self.published.is_empty() && self.failures.is_empty() && self.released.is_empty()
    }

    /// Records what is left, in order: the completion, the failures, the
    /// release; each part leaves the settlement once the database took it
    /// (the completion for `recent`, see [`REPLAY`]). On an error, what was
    /// not recorded stays.
    ///
    /// Each statement is fenced by the lease's token: a part whose messages
    /// another processor took over after the lease ran out (by the
    /// database's clock) changes nothing (counted stale). A completion
    /// recorded after the lease ran out, with no other processor having
    /// taken the messages, marks them published: they were.
    async fn record<S: OutboxStore>(
        &mut self,
        store: &S,
        retry: &RetryPolicy,
        recent: &Mutex<VecDeque<(Instant, LeaseToken, Vec<Published>)>>,
    ) -> Result<(), StoreError> {
        if !self.published.is_empty() {
            let outcome = store.complete(self.token, &self.published).await?;
            if !self.replay {
                note_stale(outcome, "completing");
            }
            let published = std::mem::take(&mut self.published);
            let now = Instant::now();
            let mut recent = locked(recent);
            while recent.front().is_some_and(|(at, _, _)| now - *at > REPLAY) {
                recent.pop_front();
            }
            recent.push_back((now, self.token, published));
        }
        if !self.failures.is_empty() {
            let outcome = store.fail(self.token, &self.failures, retry).await?;
            note_stale(outcome, "recording failures");
            self.failures.clear();
        }
        if !self.released.is_empty() {
            let outcome = store.release(self.token, &self.released).await?;
            note_stale(outcome, "releasing");
            self.released.clear();
        }
        Ok(())
    }
}

/// Counts and logs the rows a settlement found taken over.
pub(super) fn note_stale(outcome: LeaseOutcome, what: &'static str) {
    if outcome.stale > 0 {
        ::metrics::counter!(metrics::STALE).increment(outcome.stale);
        tracing::warn!(
            stale = outcome.stale,
            what,
            "outbox lease passed to another processor; its settlement was refused"
        );
    }
}

/// How long a probe may take before the database counts as away: far below
/// a pool's acquire timeout (30 s by default), above any healthy round trip.
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How far back from the last completion the database took the completions
/// are replayed when it is found away: on PostgreSQL the processor's
/// statements commit asynchronously (`outbox-sea-orm`), and a crash loses
/// the last of them (up to three `wal_writer_delay`s, 600 ms by default),
/// which would leave messages the broker stored pending, to be published
/// again after the outage, past the duplicate window.
///
/// Counted back from the last completion taken, not from when the database
/// is found away: that is up to [`PATIENCE`] + [`PROBE_TIMEOUT`] after it
/// went, later on a loaded machine, and a window counted back from it
/// missed completions taken just before the crash (the chaos soak's
/// duplicates). The last completion was taken before the crash, so every
/// completion the crash can lose is within this of it.
const REPLAY: Duration = Duration::from_secs(3);
/// How long a statement may run before the processor probes, to tell a slow
/// database from one that is away (a statement waiting for a connection to
/// a database that is down waits as long as the pool lets it).
const PATIENCE: Duration = Duration::from_secs(1);

/// Whether the database answers a probe within [`PROBE_TIMEOUT`].
pub(super) async fn answers<S: OutboxStore>(store: &S) -> bool {
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, store.probe()).await,
        Ok(Ok(()))
    )
}

/// The settlements batches could not record, and whether the database is
/// away; shared by the processor and its batches.
#[derive(Debug)]
pub(super) struct Unrecorded {
    settlements: Mutex<Vec<Settlement>>,
    /// Published messages among `settlements`.
    publishes: AtomicUsize,
    /// The completions recorded in the last [`REPLAY`], oldest first.
    recent: Mutex<VecDeque<(Instant, LeaseToken, Vec<Published>)>>,
    /// A statement failed, or a probe went unanswered, and the database has
    /// not answered since: batches leave their settlements here without
    /// trying, the processor claims nothing and probes.
    away: watch::Sender<bool>,
    health: HealthProbe,
}

impl Unrecorded {
    /// Nothing unrecorded; the database counted as answering.
    pub(super) fn new(health: HealthProbe) -> Self {
        Self {
            settlements: Mutex::new(Vec::new()),
            publishes: AtomicUsize::new(0),
            recent: Mutex::new(VecDeque::new()),
            away: watch::Sender::new(false),
            health,
        }
    }

    /// Whether the database counts as away.
    pub(super) fn away(&self) -> bool {
        *self.away.borrow()
    }

    /// A statement failed or a probe went unanswered: the database counts as
    /// away until it answers a probe.
    pub(super) fn database_away(&self) {
        if self.away.send_replace(true) {
            return;
        }
        // What it took last may be lost with it (see `REPLAY`): recorded
        // again when it answers.
        self.replay_recent();
    }

    /// Keeps the completions recorded in the last [`REPLAY`] before the
    /// newest one (all that `recent` holds: it is trimmed to that window
    /// at each completion), to be recorded again: each is fenced and
    /// idempotent, so one that was durable after all changes nothing.
    fn replay_recent(&self) {
        let recent = std::mem::take(&mut *locked(&self.recent));
        for (_, token, published) in recent {
            let mut replay = Settlement::new(token);
            replay.published = published;
            replay.replay = true;
            self.keep(replay);
        }
    }

    /// The database answered a probe.
    pub(super) fn database_answered(&self) {
        self.away.send_replace(false);
    }

    /// Resolves once the database counts as away: at once if it does,
    /// when a statement elsewhere finds it away, or when it leaves a probe
    /// unanswered (asked after each [`PATIENCE`] this runs). For a
    /// statement to give up on: one waiting for a connection to a database
    /// that is down waits as long as the pool lets it (30 s by default),
    /// while the processor should notice the database's return within a
    /// second.
    pub(super) async fn until_away<S: OutboxStore>(&self, store: &S) {
        let mut away = self.away.subscribe();
        let probing = async {
            loop {
                tokio::time::sleep(PATIENCE).await;
                if !answers(store).await {
                    self.database_away();
                    return;
                }
            }
        };
        tokio::select! {
            biased;
            _ = away.wait_for(|away| *away) => {}
            () = probing => {}
        }
    }

    /// Whether settlements wait to be recorded.
    pub(super) fn is_empty(&self) -> bool {
        locked(&self.settlements).is_empty()
    }

    /// Published messages waiting to be recorded.
    pub(super) fn publishes(&self) -> usize {
        self.publishes.load(Ordering::Acquire)
    }

    /// Records `settlement` now unless the database is away; what it could
    /// not record stays here (and the database counts as away). Also at the
    /// shutdown deadline it is tried once: a statement to a database that
    /// answers is quick, and one that does not is given up within
    /// [`PATIENCE`] + [`PROBE_TIMEOUT`].
    pub(super) async fn settle<S: OutboxStore>(
        &self,
        store: &S,
        retry: &RetryPolicy,
        mut settlement: Settlement,
    ) {
        if settlement.is_empty() {
            return;
        }
        let recorded = tokio::select! {
            biased;
            () = self.until_away(store) => None,
            recorded = settlement.record(store, retry, &self.recent) => Some(recorded),
        };
        match recorded {
            Some(Ok(())) => return,
            Some(Err(err)) => {
                self.database_away();
                tracing::warn!(
                    error = %crate::ErrorChain(&err),
                    unrecorded = settlement.published.len(),
                    "outbox settlement failed; kept until the database answers"
                );
            }
            // A statement given up on may still have been applied: recorded
            // again, it changes nothing (each is fenced and idempotent).
            None => tracing::warn!(
                unrecorded = settlement.published.len(),
                "outbox database away; settlement kept until it answers"
            ),
        }
        self.keep(settlement);
    }

    /// Records every settlement kept here, oldest first; stops at the first
    /// error (the database counts as away again) and keeps what is left.
    pub(super) async fn record<S: OutboxStore>(
        &self,
        store: &S,
        retry: &RetryPolicy,
    ) -> Result<(), StoreError> {
        // A completion a batch took just as the database went, and noted
        // after the outage was found (its replay already taken): recorded
        // again too.
        self.replay_recent();
        let waiting = std::mem::take(&mut *locked(&self.settlements));
        let publishes: usize = waiting.iter().map(|s| s.published.len()).sum();
        let mut left = waiting.into_iter();
        let mut result = Ok(());
        let mut kept = Vec::new();
        for mut settlement in left.by_ref() {
            if let Err(err) = settlement.record(store, retry, &self.recent).await {
                self.database_away();
                kept.push(settlement);
                result = Err(err);
                break;
            }
        }
        kept.extend(left);
        let still: usize = kept.iter().map(|s| s.published.len()).sum();
        if result.is_ok() && publishes > 0 {
            tracing::info!(
                recorded = publishes,
                "outbox recorded the publishes it kept while the database was away"
            );
        }
        {
            let mut settlements = locked(&self.settlements);
            // Kept ones first: they are older than any left here meanwhile.
            kept.append(&mut settlements);
            *settlements = kept;
        }
        self.publishes
            .fetch_sub(publishes - still, Ordering::AcqRel);
        self.show();
        result
    }

    fn keep(&self, settlement: Settlement) {
        self.publishes
            .fetch_add(settlement.published.len(), Ordering::AcqRel);
        locked(&self.settlements).push(settlement);
        self.show();
    }

    /// The gauge and the health probe follow the count.
    fn show(&self) {
        let publishes = self.publishes();
        ::metrics::gauge!(metrics::UNRECORDED).set(publishes as f64);
        self.health.unrecorded(publishes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ClaimedBatch, OutboxStats};
    use std::sync::atomic::{AtomicBool, AtomicU32};
    use std::time::Duration;

    /// A store whose completions fail while `down`, counting what it marked.
    #[derive(Default)]
    struct Flaky {
        down: AtomicBool,
        completed: AtomicU32,
    }

    impl OutboxStore for Flaky {
        async fn claim(&self, _: u32, _: Duration) -> Result<ClaimedBatch, StoreError> {
            unreachable!("not claimed here")
        }
        async fn claim_ids(
            &self,
            _: &[MessageId],
            _: Duration,
        ) -> Result<ClaimedBatch, StoreError> {
            unreachable!("not claimed here")
        }
        async fn complete(
            &self,
            _: LeaseToken,
            published: &[Published],
        ) -> Result<LeaseOutcome, StoreError> {
            if self.down.load(Ordering::Acquire) {
                return Err(StoreError::msg("connection refused"));
            }
            self.completed
                .fetch_add(published.len() as u32, Ordering::AcqRel);
            Ok(LeaseOutcome::new(published.len() as u64, 0))
        }
        async fn fail(
            &self,
            _: LeaseToken,
            _: &[Failure],
            _: &RetryPolicy,
        ) -> Result<LeaseOutcome, StoreError> {
            Ok(LeaseOutcome::default())
        }
        async fn release(
            &self,
            _: LeaseToken,
            _: &[MessageId],
        ) -> Result<LeaseOutcome, StoreError> {
            Ok(LeaseOutcome::default())
        }
        async fn renew(
            &self,
            _: LeaseToken,
            _: &[MessageId],
            _: Duration,
        ) -> Result<LeaseOutcome, StoreError> {
            Ok(LeaseOutcome::default())
        }
        async fn purge_published(&self, _: Duration, _: u32) -> Result<u64, StoreError> {
            Ok(0)
        }
        async fn stats(&self) -> Result<OutboxStats, StoreError> {
            Ok(OutboxStats::default())
        }
    }

    fn published(count: usize) -> Settlement {
        let mut settlement = Settlement::new(LeaseToken::new());
        settlement.published = (0..count)
            .map(|n| Published {
                id: MessageId::new(),
                stream_sequence: Some(n as u64 + 1),
            })
            .collect();
        settlement
    }

    #[tokio::test]
    async fn kept_while_the_database_is_away_and_recorded_when_it_answers() {
        let store = Flaky::default();
        let health = HealthProbe::default();
        let unrecorded = Unrecorded::new(health.clone());
        let retry = RetryPolicy::default();
        store.down.store(true, Ordering::Release);
        unrecorded.settle(&store, &retry, published(3)).await;
        assert!(unrecorded.away(), "the failed completion marks it away");
        // Away: the next batch leaves its settlement without trying.
        unrecorded.settle(&store, &retry, published(2)).await;
        assert_eq!(unrecorded.publishes(), 5);
        assert!(unrecorded.record(&store, &retry).await.is_err());
        assert_eq!(unrecorded.publishes(), 5, "nothing lost on a failed try");
        store.down.store(false, Ordering::Release);
        unrecorded.database_answered();
        unrecorded.record(&store, &retry).await.expect("recorded");
        assert!(unrecorded.is_empty());
        assert_eq!(unrecorded.publishes(), 0);
        assert_eq!(store.completed.load(Ordering::Acquire), 5);
        // Found away again at once: what it just took may be lost with it
        // (an asynchronous commit), so it is recorded again.
        unrecorded.database_away();
        assert_eq!(unrecorded.publishes(), 5, "replayed");
        unrecorded.database_answered();
        unrecorded.record(&store, &retry).await.expect("recorded");
        assert_eq!(store.completed.load(Ordering::Acquire), 10);
        assert_eq!(
            health
                .check(&super::super::HealthThresholds::default())
                .unrecorded,
            0
        );
    }

    /// The soak's duplicates: the database is found away some seconds after
    /// it went (a probe's patience and timeout, a loaded machine), longer
    /// than the replay window after the last completion it took. That
    /// completion may be lost with it all the same, so it is recorded again.
    #[tokio::test(start_paused = true)]
    async fn the_last_completions_are_replayed_however_late_the_outage_is_found() {
        let store = Flaky::default();
        let unrecorded = Unrecorded::new(HealthProbe::default());
        let retry = RetryPolicy::default();
        unrecorded.settle(&store, &retry, published(2)).await;
        tokio::time::advance(REPLAY / 2).await;
        unrecorded.settle(&store, &retry, published(3)).await;
        assert_eq!(store.completed.load(Ordering::Acquire), 5);
        // Found away well past the window counted from now.
        tokio::time::advance(REPLAY * 2).await;
        unrecorded.database_away();
        assert_eq!(unrecorded.publishes(), 5, "both completions replayed");
        unrecorded.database_answered();
        unrecorded.record(&store, &retry).await.expect("recorded");
        assert_eq!(store.completed.load(Ordering::Acquire), 10);
    }

    /// A completion noted just after the outage was found (its batch's
    /// statement was answered before the database went) is recorded again
    /// when the database answers.
    #[tokio::test]
    async fn a_completion_noted_after_the_outage_was_found_is_recorded_again() {
        let store = Flaky::default();
        let unrecorded = Unrecorded::new(HealthProbe::default());
        let retry = RetryPolicy::default();
        unrecorded.database_away();
        // Another batch's statement, answered before the crash.
        published(4)
            .record(&store, &retry, &unrecorded.recent)
            .await
            .expect("recorded");
        assert_eq!(unrecorded.publishes(), 0);
        unrecorded.database_answered();
        unrecorded.record(&store, &retry).await.expect("recorded");
        assert_eq!(store.completed.load(Ordering::Acquire), 8, "recorded again");
    }
}
