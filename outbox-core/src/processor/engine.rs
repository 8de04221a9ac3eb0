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
use super::metrics;
use super::wake::FAST_PATH_CAPACITY;
use super::{Processor, ProcessorReport};
use crate::id::MessageId;
use crate::publisher::Publisher;
use crate::store::{ClaimedBatch, OutboxStore, StoreError};

/// How often a paused processor asks the publisher whether the broker is back.
const AVAILABILITY_CHECK: Duration = Duration::from_millis(50);
/// First and longest pause after the store failed a claim.
const STORE_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

/// Where the next claim comes from.
enum Claim {
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
    unavailable_backoff: (Duration, Duration),
    /// Fast-path ids not yet claimed.
    committed: VecDeque<MessageId>,
    /// When the oldest of `committed` arrived.
    committed_since: Option<Instant>,
    /// See [`ProcessorConfig::gather`](super::ProcessorConfig::gather).
    gather: Duration,
    /// An ordinary claim is due.
    claim_due: bool,
    /// A fast-path claim came up short (an earlier message of an aggregate
    /// was in flight): claim again once a batch completes.
    recheck_after_batch: bool,
    /// While the broker is unavailable: the current pause.
    broker_pause: Option<Duration>,
    /// The pause the next unavailability gets: doubles, reset by an ack.
    next_broker_pause: Duration,
    store_pause: Option<Duration>,
    report: ProcessorReport,
}

pub(super) async fn run<S: OutboxStore + 'static, P: Publisher>(
    processor: Processor<S, P>,
    shutdown: CancellationToken,
) -> ProcessorReport {
    let Processor {
        store,
        publisher,
        config,
        wake,
        sources,
    } = processor;
    let mut background = JoinSet::new();
    for source in sources {
        background.spawn(source);
    }
    if let Some(interval) = config.stats_interval {
        background.spawn(refresh_gauges(Arc::clone(&store), interval));
    }
    let abort = CancellationToken::new();
    let mut engine = Engine {
        ctx: Arc::new(BatchContext {
            store,
            publisher,
            permits: Arc::new(Semaphore::new(config.max_in_flight)),
            shutdown: shutdown.clone(),
            abort: abort.clone(),
            lease: config.lease,
            retry: config.retry,
        }),
        batch_size: config.batch_size,
        batches_in_flight: config.batches_in_flight,
        poll_interval: config.poll_interval,
        unavailable_backoff: config.unavailable_backoff,
        committed: VecDeque::new(),
        committed_since: None,
        gather: config.gather,
        claim_due: true, // catch up with whatever is pending at start
        recheck_after_batch: false,
        broker_pause: None,
        next_broker_pause: config.unavailable_backoff.0,
        store_pause: None,
        report: ProcessorReport::default(),
    };
    tracing::info!(
        batch_size = config.batch_size,
        lease_ms = config.lease.as_millis() as u64,
        "outbox processor started"
    );

    let mut batches: JoinSet<BatchReport> = JoinSet::new();
    let mut next_poll = Instant::now() + engine.poll_interval;
    while !shutdown.is_cancelled() {
        while let Some(done) = batches.try_join_next() {
            engine.finished(done);
        }
        if let Some(pause) = engine.broker_pause {
            engine.wait_for_broker(pause, &shutdown).await;
            continue;
        }
        if !engine.ctx.publisher.is_available() {
            engine.broker_unavailable();
            continue;
        }
        if batches.len() >= engine.batches_in_flight {
            tokio::select! {
                Some(done) = batches.join_next() => engine.finished(done),
                () = shutdown.cancelled() => {}
            }
            continue;
        }
        let woken = wake.take();
        engine.claim_due |= woken.claim;
        engine.take_committed(woken.committed);
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
                () = sleep_until(next_poll) => engine.claim_due = true,
                () = shutdown.cancelled() => {}
            }
            continue;
        };
        next_poll = Instant::now() + engine.poll_interval;
        match engine.claim(claim).await {
            Ok(Some(claimed)) => {
                engine.report.batches += 1;
                let ctx = Arc::clone(&engine.ctx);
                let span = tracing::debug_span!(
                    "outbox.batch",
                    token = %claimed.lease.token,
                    size = claimed.messages.len()
                );
                batches.spawn(batch::run(ctx, claimed).instrument(span));
            }
            Ok(None) => {}
            Err(err) => engine.store_failed(err, &shutdown).await,
        }
    }

    // Shutdown: no new claims; acks in flight get until the deadline.
    let deadline = sleep(config.shutdown_timeout);
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
    background.abort_all();
    tracing::info!(
        published = engine.report.published,
        dead = engine.report.dead,
        released = engine.report.released,
        "outbox processor stopped"
    );
    engine.report
}

impl<S: OutboxStore, P: Publisher> Engine<S, P> {
    fn take_committed(&mut self, ids: Vec<MessageId>) {
        if self.committed.is_empty() && !ids.is_empty() {
            self.committed_since = Some(Instant::now());
        }
        self.committed.extend(ids);
        if self.committed.len() > FAST_PATH_CAPACITY {
            // Too many to hold: an ordinary claim finds them all.
            self.committed.clear();
            self.committed_since = None;
            self.claim_due = true;
        }
    }

    /// Until when just-committed messages wait for more before they are
    /// claimed: only while `in_flight` batches are publishing, less than a
    /// batch has gathered, and the oldest has waited less than `gather`.
    fn gathering(&self, in_flight: usize) -> Option<Instant> {
        if in_flight == 0
            || self.committed.is_empty()
            || self.committed.len() >= self.batch_size as usize
        {
            return None;
        }
        let until = self.committed_since? + self.gather;
        (Instant::now() < until).then_some(until)
    }

    fn next_claim(&mut self) -> Option<Claim> {
        if !self.committed.is_empty() {
            let take = self.committed.len().min(self.batch_size as usize);
            let claim = Claim::Committed(self.committed.drain(..take).collect());
            self.committed_since = (!self.committed.is_empty()).then(Instant::now);
            return Some(claim);
        }
        if std::mem::take(&mut self.claim_due) {
            return Some(Claim::Oldest);
        }
        None
    }

    async fn claim(&mut self, claim: Claim) -> Result<Option<ClaimedBatch>, StoreError> {
        let lease = self.ctx.lease;
        let store = &self.ctx.store;
        let claimed = match claim {
            Claim::Committed(ids) => {
                let claimed = store.claim_ids(&ids, lease).await?;
                if claimed.messages.len() < ids.len() {
                    self.recheck_after_batch = true;
                }
                claimed
            }
            Claim::Oldest => {
                let claimed = store.claim(self.batch_size, lease).await?;
                // A full batch: more are probably waiting.
                self.claim_due = claimed.messages.len() >= self.batch_size as usize;
                claimed
            }
        };
        self.store_pause = None;
        Ok((!claimed.messages.is_empty()).then_some(claimed))
    }

    fn finished(&mut self, done: Result<BatchReport, tokio::task::JoinError>) {
        let report = match done {
            Ok(report) => report,
            Err(err) => {
                // Its messages stay leased until the lease runs out, then
                // any processor claims them again.
                tracing::error!(error = %err, "outbox batch task failed");
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
            self.next_broker_pause = self.unavailable_backoff.0;
        }
        // Messages held back behind this batch's may be publishable now: a
        // full batch may have cut an aggregate's run in two.
        if std::mem::take(&mut self.recheck_after_batch)
            || report.claimed >= self.batch_size as usize
            || report.released > 0
            || report.failed > 0
            || report.lease_lost
        {
            self.claim_due = true;
        }
    }

    fn broker_unavailable(&mut self) {
        let pause = self.next_broker_pause;
        self.next_broker_pause = (pause * 2).min(self.unavailable_backoff.1);
        metrics_unavailable();
        self.broker_pause = Some(pause);
    }

    /// Sleeps `pause`, or less when the publisher reports the broker back;
    /// then catches up with an ordinary claim.
    async fn wait_for_broker(&mut self, pause: Duration, shutdown: &CancellationToken) {
        let until = Instant::now() + pause;
        let was_down = !self.ctx.publisher.is_available();
        while Instant::now() < until && !shutdown.is_cancelled() {
            if was_down && self.ctx.publisher.is_available() {
                break; // reconnected: try at once
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

    async fn store_failed(&mut self, err: StoreError, shutdown: &CancellationToken) {
        let (first, max) = STORE_BACKOFF;
        let pause = self.store_pause.map_or(first, |p| (p * 2).min(max));
        self.store_pause = Some(pause);
        self.claim_due = true;
        tracing::warn!(error = %err, pause_ms = pause.as_millis() as u64, "outbox claim failed; retrying");
        tokio::select! {
            () = sleep(pause) => {}
            () = shutdown.cancelled() => {}
        }
    }
}

fn metrics_unavailable() {
    ::metrics::counter!(metrics::BROKER_UNAVAILABLE).increment(1);
}

async fn refresh_gauges<S: OutboxStore>(store: Arc<S>, interval: Duration) {
    let mut ticks = tokio::time::interval(interval);
    loop {
        ticks.tick().await;
        match store.stats().await {
            Ok(stats) => metrics::gauges(&stats),
            Err(err) => tracing::warn!(error = %err, "outbox stats failed"),
        }
    }
}
