//! The processor's loop: decide what to claim, keep up to
//! `batches_in_flight` batches publishing, pause while the broker is away.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::batch::{self, BatchContext, BatchReport};
use super::health::HealthProbe;
use super::metrics;
use super::unrecorded::{Unrecorded, answers};
use super::wake::handover::Handover;
use super::wake::{FAST_PATH_CAPACITY, Uncertain, WakeHandle};
use super::{Processor, ProcessorError, ProcessorReport};
use crate::backoff::Doubling;
use crate::id::{LeaseToken, MessageId};
use crate::publisher::Publisher;
use crate::store::{ClaimedBatch, ClaimedMessage, Lease, MissingSchema, OutboxStore, StoreError};

/// The most messages of one aggregate handed to the publisher at once: with
/// JetStream they are in flight together, each stored only after the one
/// before it (see `JetStreamPublisher::publish_run`).
const RUN_WINDOW: usize = 64;
/// How often a paused processor asks the publisher whether the broker is back.
const AVAILABILITY_CHECK: Duration = Duration::from_millis(50);
/// First and longest pause after the store failed a claim.
const STORE_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));
/// How often the processor probes a database that is away.
const PROBE_INTERVAL: Duration = Duration::from_millis(250);
/// How long after the database's return the processor waits before it
/// claims: time for every processor to record what it published while the
/// database was away (each notices the return within a probe, and records
/// first), so none claims, and publishes again, what another one published
/// but could not record yet.
const RECORD_GRACE: Duration = Duration::from_secs(1);

/// Where the next batch comes from.
enum Claim {
    /// Messages leased at commit: publish them, no claim needed.
    Handed(Vec<Handover>),
    /// Lease these just-committed messages by id.
    Committed(Vec<MessageId>),
    /// An ordinary claim of the oldest publishable messages.
    Oldest,
}

struct Engine<S, P> {
    ctx: Arc<BatchContext<S, P>>,
    batch_size: u32,
    batches_in_flight: usize,
    poll_interval: Duration,
    /// Commits leased to this processor at commit, not yet publishing.
    handed: VecDeque<Handover>,
    /// Messages in `handed`.
    handed_messages: usize,
    /// Fast-path ids not yet claimed.
    committed: VecDeque<MessageId>,
    /// When the oldest of `handed` and `committed` arrived.
    fast_since: Option<Instant>,
    /// See [`ProcessorConfig::gather`](super::ProcessorConfig::gather).
    gather: Duration,
    /// An ordinary claim is due.
    claim_due: bool,
    /// When the next ordinary claim is due whatever happens meanwhile: at
    /// least one per `poll_interval`, however busy the fast path keeps the
    /// processor (reset only by an ordinary claim).
    next_poll: Instant,
    /// A fast-path claim came up short (an earlier message of an aggregate
    /// was in flight): claim again once a batch completes.
    recheck_after_batch: bool,
    /// While the broker is unavailable: the current pause.
    broker_pause: Option<Duration>,
    /// The pause the next unavailability gets: doubles, reset by an ack
    /// and by a reconnect.
    broker_backoff: Doubling,
    /// The publisher reported the broker disconnected at the last
    /// unavailability or during the pause after it: seeing it connected
    /// again is a reconnect (the pause ends at once).
    broker_disconnected: bool,
    store_backoff: Doubling,
    /// The pause before the next claim after a failed one, when the
    /// database answers a probe at once (the failure was not an outage).
    store_pause: Option<Duration>,
    /// A probe went unanswered since the database last answered: when it
    /// does, the processor records what it kept, then waits
    /// [`RECORD_GRACE`] before it claims.
    database_was_away: bool,
    /// Lease offers are paused (the broker was away).
    offers_paused: bool,
    report: ProcessorReport,
}

pub(super) async fn run<S: OutboxStore + 'static, P: Publisher>(
    processor: Processor<S, P>,
    shutdown: CancellationToken,
) -> Result<ProcessorReport, ProcessorError> {
    let Processor {
        store,
        publisher,
        config,
        wake,
        sources,
        health,
        cleanup: _,     // run beside the engine (`Processor::run`)
        destination: _, // checked by `Processor::check`, before it runs
    } = processor;
    // Running (alive) from here: a database that cannot answer the schema
    // check yet is an outage the probe reports as such, not a dead task.
    let _running = health.started();
    if let Err(missing) = check_schema(&*store, &shutdown).await {
        tracing::error!(
            error = %missing,
            "outbox processor cannot start: its table is missing or incomplete"
        );
        health.failed(format!("the processor could not start: {missing}"));
        return Err(ProcessorError::MissingSchema(missing));
    }
    // Sources may now offer leases at commit; whatever way this task ends,
    // no writer enters an offer afterwards.
    wake.serve(config.lease);
    let _close_offers = CloseOffersOnDrop(wake.clone());
    let mut background = JoinSet::new();
    for source in sources {
        background.spawn(source);
    }
    if let Some(interval) = config.stats_interval {
        background.spawn(refresh_gauges(Arc::clone(&store), interval, health.clone()));
    }
    let abort = CancellationToken::new();
    let unrecorded = Arc::new(Unrecorded::new(health.clone()));
    let mut engine = Engine {
        ctx: Arc::new(BatchContext {
            store,
            publisher,
            permits: Arc::new(Semaphore::new(config.max_in_flight)),
            shutdown: shutdown.clone(),
            abort: abort.clone(),
            lease: config.lease,
            retry: config.retry,
            run_window: RUN_WINDOW.min(config.max_in_flight).max(1),
            isolation: Arc::new(Semaphore::new(1)),
            unrecorded: Arc::clone(&unrecorded),
        }),
        batch_size: config.batch_size,
        batches_in_flight: config.batches_in_flight,
        poll_interval: config.poll_interval,
        handed: VecDeque::new(),
        handed_messages: 0,
        committed: VecDeque::new(),
        fast_since: None,
        gather: config.gather,
        claim_due: true, // catch up with whatever is pending at start
        next_poll: Instant::now() + config.poll_interval,
        recheck_after_batch: false,
        broker_pause: None,
        broker_backoff: Doubling::new(config.unavailable_backoff.0, config.unavailable_backoff.1),
        broker_disconnected: false,
        store_backoff: Doubling::new(STORE_BACKOFF.0, STORE_BACKOFF.1),
        store_pause: None,
        database_was_away: false,
        offers_paused: false,
        report: ProcessorReport::default(),
    };
    tracing::info!(
        batch_size = config.batch_size,
        lease_ms = config.lease.as_millis() as u64,
        "outbox processor started"
    );

    let mut batches: JoinSet<BatchReport> = JoinSet::new();
    while !shutdown.is_cancelled() {
        while let Some(done) = batches.try_join_next() {
            engine.finished(done);
        }
        // What was published and not recorded is recorded before anything
        // is claimed (or handed over published): nothing of it is published
        // twice, and what the processor holds in memory stays within the
        // batches it had in flight.
        if unrecorded.away() || !unrecorded.is_empty() {
            engine.wait_for_database(&shutdown).await;
            continue;
        }
        if let Some(pause) = engine.broker_pause {
            engine.wait_for_broker(pause, &wake, &shutdown).await;
            continue;
        }
        if !engine.ctx.publisher.is_available() {
            engine.broker_unavailable();
            continue;
        }
        if std::mem::take(&mut engine.offers_paused) {
            wake.resume_offers(); // the broker is back
        }
        if batches.len() >= engine.batches_in_flight {
            tokio::select! {
                Some(done) = batches.join_next() => engine.finished(done),
                () = shutdown.cancelled() => {}
            }
            continue;
        }
        let woken = wake.take();
        engine.claim_due |= woken.claim || Instant::now() >= engine.next_poll;
        engine.take_handed(woken.handed);
        engine.take_committed(woken.committed);
        engine.release_uncertain(woken.uncertain).await;
        if let Some(until) = engine.gathering(batches.len()) {
            tokio::select! {
                () = wake.woken() => {}
                Some(done) = batches.join_next() => engine.finished(done),
                () = sleep_until(until) => {}
                () = shutdown.cancelled() => {}
            }
            continue;
        }
        let Some(claim) = engine.next_claim() else {
            tokio::select! {
                () = wake.woken() => {}
                Some(done) = batches.join_next() => engine.finished(done),
                () = sleep_until(engine.next_poll) => engine.claim_due = true,
                () = shutdown.cancelled() => {}
            }
            continue;
        };
        let leased_at = claim.leased_at();
        // A claim waiting for a connection to a database that went away is
        // given up once a probe goes unanswered (see `Unrecorded::until_away`).
        let store = Arc::clone(&engine.ctx.store);
        let claimed = tokio::select! {
            biased;
            () = unrecorded.until_away(&*store) => Err(StoreError::msg(
                "the database does not answer; the claim was given up",
            )),
            claimed = engine.claim(claim, leased_at, &wake) => claimed,
        };
        if claimed.is_ok() {
            health.claimed();
        }
        match claimed {
            Ok(Some(claimed)) => {
                engine.report.batches += 1;
                let ctx = Arc::clone(&engine.ctx);
                let span = tracing::debug_span!(
                    "outbox.batch",
                    token = %claimed.lease.token,
                    size = claimed.messages.len()
                );
                batches.spawn(batch::run(ctx, claimed, leased_at).instrument(span));
            }
            Ok(None) => {}
            Err(err) => engine.store_failed(&err),
        }
    }

    // Shutdown: no new claims, nothing handed over any more (what was, and
    // is not publishing, goes back); writers inside an offer and acks in
    // flight get until the deadline, writers later than that release what
    // they committed themselves (their hand-over is refused).
    let deadline = Instant::now() + config.shutdown_timeout;
    let record_by = deadline;
    if tokio::time::timeout_at(deadline, wake.close_offers())
        .await
        .is_err()
    {
        tracing::warn!(
            "outbox processor shutdown deadline reached while writers were committing leased \
             to it; they release their messages themselves"
        );
    }
    let last = wake.take_last();
    engine.take_handed(last.handed);
    engine.release_uncertain(last.uncertain).await;
    engine.release_handed(&wake).await;
    let deadline = sleep_until(deadline);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            done = batches.join_next() => match done {
                Some(done) => engine.finished(done),
                None => break,
            },
            () = &mut deadline, if !abort.is_cancelled() => {
                tracing::warn!("outbox processor shutdown deadline reached; releasing unacknowledged messages");
                abort.cancel();
            }
        }
    }
    engine.record_before_stop(record_by).await;
    background.abort_all();
    tracing::info!(
        published = engine.report.published,
        dead = engine.report.dead,
        released = engine.report.released,
        "outbox processor stopped"
    );
    Ok(engine.report)
}

/// The store's [schema check](OutboxStore::check_schema), retried while the
/// store cannot answer (an unreachable database), until it answers or
/// `shutdown` is cancelled; `Err` when it found the schema missing.
async fn check_schema<S: OutboxStore>(
    store: &S,
    shutdown: &CancellationToken,
) -> Result<(), MissingSchema> {
    let mut backoff = Doubling::new(STORE_BACKOFF.0, STORE_BACKOFF.1);
    loop {
        let Err(err) = store.check_schema().await else {
            return Ok(());
        };
        if let Some(missing) = err.missing_schema() {
            return Err(missing.clone());
        }
        tracing::warn!(
            error = %crate::ErrorChain(&err),
            "outbox processor could not check its table; retrying"
        );
        tokio::select! {
            () = sleep(backoff.next_pause()) => {}
            () = shutdown.cancelled() => return Ok(()),
        }
    }
}

impl<S: OutboxStore, P: Publisher> Engine<S, P> {
    /// Fast-path messages waiting: handed over, and ids to claim.
    fn fast_waiting(&self) -> usize {
        self.handed_messages + self.committed.len()
    }

    fn mark_fast_arrival(&mut self, was_waiting: usize) {
        if was_waiting == 0 && self.fast_waiting() > 0 {
            self.fast_since = Some(Instant::now());
        }
    }

    fn take_handed(&mut self, handed: Vec<Handover>) {
        let was_waiting = self.fast_waiting();
        for handover in handed {
            self.handed_messages += handover.messages.len();
            self.handed.push_back(handover);
        }
        self.mark_fast_arrival(was_waiting);
    }

    fn take_committed(&mut self, ids: Vec<MessageId>) {
        let was_waiting = self.fast_waiting();
        self.committed.extend(ids);
        if self.committed.len() > FAST_PATH_CAPACITY {
            // Too many to hold: an ordinary claim finds them all.
            self.committed.clear();
            self.claim_due = true;
        }
        self.mark_fast_arrival(was_waiting);
        if self.fast_waiting() == 0 {
            self.fast_since = None;
        }
    }

    /// Until when fast-path messages wait for more before they are
    /// published or claimed: only while `in_flight` batches are publishing,
    /// less than a batch has gathered, and the oldest has waited less than
    /// `gather`.
    fn gathering(&self, in_flight: usize) -> Option<Instant> {
        let waiting = self.fast_waiting();
        if in_flight == 0 || waiting == 0 || waiting >= self.batch_size as usize {
            return None;
        }
        let until = self.fast_since? + self.gather;
        (Instant::now() < until).then_some(until)
    }

    /// The next claim: an ordinary one first when it is due (its timer ran
    /// out, or a batch's outcome may have made messages publishable that no
    /// wake-up names), so a busy fast path never starves it; then what this
    /// process's commits handed over, then the ids they named.
    fn next_claim(&mut self) -> Option<Claim> {
        let claim = if std::mem::take(&mut self.claim_due) {
            self.next_poll = Instant::now() + self.poll_interval;
            return Some(Claim::Oldest);
        } else if let Some(token) = self.handed.front().map(|h| h.token) {
            Claim::Handed(self.take_handed_batch(token))
        } else if !self.committed.is_empty() {
            let take = self.committed.len().min(self.batch_size as usize);
            Claim::Committed(self.committed.drain(..take).collect())
        } else {
            return None;
        };
        self.fast_since = (self.fast_waiting() > 0).then(Instant::now);
        Some(claim)
    }

    /// Whole commits handed over under `token`, up to a batch (at least
    /// one: a commit is never split, so an aggregate's messages stay in one
    /// batch, in order).
    fn take_handed_batch(&mut self, token: LeaseToken) -> Vec<Handover> {
        let mut taken = Vec::new();
        let mut messages = 0;
        while let Some(next) = self.handed.front() {
            let fits =
                taken.is_empty() || messages + next.messages.len() <= self.batch_size as usize;
            if next.token != token || !fits {
                break;
            }
            messages += next.messages.len();
            taken.extend(self.handed.pop_front());
        }
        self.handed_messages -= messages;
        taken
    }

    /// Gives back (unleases) everything handed over that is not publishing.
    async fn release_handed(&mut self, wake: &WakeHandle) {
        while let Some(token) = self.handed.front().map(|h| h.token) {
            let handed = self.take_handed_batch(token);
            let ids: Vec<MessageId> = handed
                .iter()
                .flat_map(|h| h.messages.iter().map(|m| m.id))
                .collect();
            wake.handed_settled(ids.len());
            match self.unless_away(self.ctx.store.release(token, &ids)).await {
                Ok(outcome) => self.report.released += outcome.applied,
                // Their lease runs out; any processor claims them then.
                Err(err) => {
                    tracing::warn!(error = %crate::ErrorChain(&err), "outbox release of handed-over messages failed")
                }
            }
        }
    }

    /// Releases what commits with an unknown outcome may have written
    /// leased to this processor, then claims: those that were committed are
    /// published now rather than after their lease.
    async fn release_uncertain(&mut self, uncertain: Vec<Uncertain>) {
        for Uncertain { token, ids } in uncertain {
            self.claim_due = true;
            match self.unless_away(self.ctx.store.release(token, &ids)).await {
                Ok(outcome) => self.report.released += outcome.applied,
                // Their lease runs out; any processor claims them then.
                Err(err) => {
                    tracing::warn!(error = %crate::ErrorChain(&err), "outbox release after an uncertain commit failed")
                }
            }
        }
    }

    /// `statement`, unless the database is away or goes away while it
    /// waits (a failed error then): the engine never waits on a pool's
    /// acquire timeout for a database that is down.
    async fn unless_away<T>(
        &self,
        statement: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        tokio::select! {
            biased;
            () = self.ctx.unrecorded.until_away(&*self.ctx.store) => {
                Err(StoreError::msg("the database does not answer"))
            }
            result = statement => result,
        }
    }

    async fn claim(
        &mut self,
        claim: Claim,
        leased_at: Instant,
        wake: &WakeHandle,
    ) -> Result<Option<ClaimedBatch>, StoreError> {
        let lease = self.ctx.lease;
        let store = &self.ctx.store;
        let claimed = match claim {
            Claim::Handed(handed) => {
                let batch = handed_batch(handed, leased_at, lease);
                wake.handed_settled(batch.messages.len());
                batch
            }
            Claim::Committed(ids) => {
                let claimed = store.claim_ids(&ids, lease).await?;
                if claimed.messages.len() < ids.len() {
                    self.recheck_after_batch = true;
                }
                claimed
            }
            Claim::Oldest => {
                let claimed = store.claim(self.batch_size, lease).await?;
                // The claim stopped at its limit, or came back full: more
                // are probably waiting.
                self.claim_due = claimed.more || claimed.messages.len() >= self.batch_size as usize;
                claimed
            }
        };
        self.store_backoff.reset();
        Ok((!claimed.messages.is_empty()).then_some(claimed))
    }

    fn finished(&mut self, done: Result<BatchReport, tokio::task::JoinError>) {
        let report = match done {
            Ok(report) => report,
            Err(err) => {
                // Its messages stay leased until the lease runs out, then
                // any processor claims them again.
                tracing::error!(error = %crate::ErrorChain(&err), "outbox batch task failed");
                return;
            }
        };
        self.report.published += report.published;
        self.report.failed += report.failed;
        self.report.dead += report.dead;
        self.report.released += report.released;
        if report.broker_unavailable {
            self.broker_unavailable();
        } else if report.published > 0 {
            self.broker_backoff.reset();
            self.broker_disconnected = false;
        }
        // Messages held back behind this batch's may be publishable now: a
        // full batch, or one whose claim stopped at its limit, may have cut
        // an aggregate's run in two.
        if std::mem::take(&mut self.recheck_after_batch)
            || report.more
            || report.claimed >= self.batch_size as usize
            || report.released > 0
            || report.failed > 0
            || report.lease_lost
        {
            self.claim_due = true;
        }
    }

    fn broker_unavailable(&mut self) {
        let connected = self.ctx.publisher.is_available();
        if connected && self.broker_disconnected {
            // Reconnected, yet unable to store: a restarted server still
            // recovering its streams answers "unavailable" for a moment.
            // The pauses start short again rather than at the length the
            // outage grew them to.
            self.broker_backoff.reset();
        }
        self.broker_disconnected = !connected;
        let pause = self.broker_backoff.next_pause();
        metrics_unavailable();
        self.broker_pause = Some(pause);
    }

    /// Sleeps `pause`, or less when the publisher reports the broker back;
    /// then catches up with an ordinary claim.
    async fn wait_for_broker(
        &mut self,
        pause: Duration,
        wake: &WakeHandle,
        shutdown: &CancellationToken,
    ) {
        // Hold nothing leased while the broker is away: writers lease no
        // more at commit, and what was handed over goes back to pending
        // (writers still inside hand over later: released on the next pause,
        // or published if the broker is back by then).
        wake.pause_offers();
        self.offers_paused = true;
        let woken = wake.take();
        self.claim_due |= woken.claim;
        self.take_handed(woken.handed);
        self.take_committed(woken.committed);
        self.release_uncertain(woken.uncertain).await;
        self.release_handed(wake).await;
        let until = Instant::now() + pause;
        while Instant::now() < until && !shutdown.is_cancelled() {
            // Also a connection lost only during the pause (a failure seen
            // while the client still counted as connected, e.g. an ack
            // timeout before the client noticed the broker gone).
            if !self.ctx.publisher.is_available() {
                self.broker_disconnected = true;
            } else if self.broker_disconnected {
                break; // reconnected: try at once (see `broker_unavailable`)
            }
            tokio::select! {
                () = sleep(AVAILABILITY_CHECK.min(until - Instant::now())) => {}
                () = shutdown.cancelled() => {}
            }
        }
        // Try again: a failure pauses longer (see `broker_unavailable`), an
        // ack resets the pause. Fast-path ids are kept: their rows are pending.
        self.broker_pause = None;
        self.claim_due = true;
        tracing::debug!("outbox processor resuming after the broker pause");
    }

    /// A claim failed: the database counts as away until it answers a
    /// probe (see [`wait_for_database`](Self::wait_for_database)).
    fn store_failed(&mut self, err: &StoreError) {
        let pause = self.store_backoff.next_pause();
        self.store_pause = Some(pause);
        self.claim_due = true;
        self.ctx.unrecorded.database_away();
        tracing::warn!(error = %crate::ErrorChain(err), pause_ms = pause.as_millis() as u64, "outbox claim failed; retrying");
    }

    /// While the database is away, or what batches published is not
    /// recorded yet: probes (each with a timeout far shorter than a pool's
    /// acquire timeout) every [`PROBE_INTERVAL`] until it answers, then
    /// records what the batches kept, first, then claims: after
    /// [`RECORD_GRACE`] when the database was away (other processors record
    /// theirs meanwhile), after the store backoff when it answered at once
    /// (the claim failed for another reason).
    async fn wait_for_database(&mut self, shutdown: &CancellationToken) {
        let unrecorded = Arc::clone(&self.ctx.unrecorded);
        let store = &*self.ctx.store;
        if unrecorded.away() {
            if !answers(store).await {
                if !std::mem::replace(&mut self.database_was_away, true) {
                    tracing::warn!(
                        unrecorded = unrecorded.publishes(),
                        "outbox database away: claiming nothing, keeping what was published \
                         until it can be recorded; probing"
                    );
                }
                tokio::select! {
                    () = sleep(PROBE_INTERVAL) => {}
                    () = shutdown.cancelled() => {}
                }
                return;
            }
            unrecorded.database_answered();
        }
        if let Err(err) = unrecorded.record(store, &self.ctx.retry).await {
            let pause = self.store_backoff.next_pause();
            tracing::warn!(
                error = %crate::ErrorChain(&err),
                unrecorded = unrecorded.publishes(),
                pause_ms = pause.as_millis() as u64,
                "outbox could not record what it published; retrying"
            );
            tokio::select! {
                () = sleep(pause) => {}
                () = shutdown.cancelled() => {}
            }
            return;
        }
        let pause = if std::mem::take(&mut self.database_was_away) {
            tracing::info!("outbox database answers again; claiming shortly");
            self.store_backoff.reset();
            self.store_pause = None;
            RECORD_GRACE
        } else {
            self.store_pause.take().unwrap_or_default()
        };
        self.claim_due = true;
        if !pause.is_zero() {
            tokio::select! {
                () = sleep(pause) => {}
                () = shutdown.cancelled() => {}
            }
        }
    }

    /// At shutdown: records what batches kept, probing while the database
    /// is away, until `deadline`; what is left then is published again
    /// after its lease runs out (deduplicated inside the stream's duplicate
    /// window).
    async fn record_before_stop(&mut self, deadline: Instant) {
        let unrecorded = Arc::clone(&self.ctx.unrecorded);
        let store = &*self.ctx.store;
        while !unrecorded.is_empty() {
            let recorded = async {
                if unrecorded.away() && !answers(store).await {
                    return false;
                }
                unrecorded.database_answered();
                unrecorded.record(store, &self.ctx.retry).await.is_ok()
            };
            let recorded = tokio::time::timeout_at(deadline, recorded).await;
            if recorded == Ok(true) {
                continue;
            }
            if recorded.is_err() || Instant::now() + PROBE_INTERVAL >= deadline {
                tracing::error!(
                    unrecorded = unrecorded.publishes(),
                    "outbox shutdown deadline reached before the database recorded what was \
                     published; their leases will run out and they be published again"
                );
                return;
            }
            sleep(PROBE_INTERVAL).await;
        }
    }
}

impl Claim {
    /// No later than the start of the lease this batch will hold.
    fn leased_at(&self) -> Instant {
        match self {
            Claim::Handed(handed) => handed
                .iter()
                .map(|h| h.since)
                .min()
                .unwrap_or_else(Instant::now),
            Claim::Committed(_) | Claim::Oldest => Instant::now(),
        }
    }
}

/// A batch of messages leased at commit, as a claim would have returned it.
fn handed_batch(handed: Vec<Handover>, leased_at: Instant, lease: Duration) -> ClaimedBatch {
    let token = handed.first().map_or_else(LeaseToken::new, |h| h.token);
    let mut messages: Vec<ClaimedMessage> = handed
        .into_iter()
        .flat_map(|h| h.messages)
        .map(|message| ClaimedMessage {
            message,
            attempts: 0,
            abandoned: 0,
        })
        .collect();
    ClaimedMessage::sort_for_publishing(&mut messages);
    // The lease ran from the commit (no earlier than `leased_at`).
    let leased_at =
        chrono::Utc::now() - chrono::Duration::from_std(leased_at.elapsed()).unwrap_or_default();
    ClaimedBatch {
        lease: Lease {
            token,
            expires_at: leased_at
                + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX),
        },
        messages,
        more: false,
    }
}

/// Closes the processor's lease offers when its task ends, however it ends.
struct CloseOffersOnDrop(WakeHandle);

impl Drop for CloseOffersOnDrop {
    fn drop(&mut self) {
        self.0.close_offers_now();
    }
}

fn metrics_unavailable() {
    ::metrics::counter!(metrics::BROKER_UNAVAILABLE).increment(1);
}

async fn refresh_gauges<S: OutboxStore>(store: Arc<S>, interval: Duration, health: HealthProbe) {
    let mut ticks = tokio::time::interval(interval);
    loop {
        ticks.tick().await;
        match store.stats().await {
            Ok(stats) => {
                metrics::gauges(&stats);
                health.backlog(&stats);
            }
            Err(err) => tracing::warn!(error = %crate::ErrorChain(&err), "outbox stats failed"),
        }
    }
}
