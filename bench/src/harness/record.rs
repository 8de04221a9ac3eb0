//! Decorators that observe the processor from outside: a [`Publisher`] that
//! records when each message was acknowledged, and an [`OutboxStore`] that
//! counts and times every call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use txoutbox_core::{
    ClaimedBatch, DeadSelector, Failure, LeaseOutcome, LeaseToken, MessageId, OutboxMessage,
    OutboxStats, OutboxStore, PublishAck, PublishError, Published, Publisher, RetryPolicy,
    SkipNote, StoreError,
};

/// The (message id, wall-clock ack time) pairs a [`RecordingPublisher`]
/// collected, and how many acks said the broker had the message already (a
/// re-publish absorbed by deduplication). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Acks {
    inner: Arc<Mutex<Vec<(MessageId, SystemTime)>>>,
    duplicates: Arc<AtomicU64>,
}

impl Acks {
    /// Acks of re-publishes the broker dropped as duplicates, so far.
    pub(crate) fn duplicates(&self) -> u64 {
        self.duplicates.load(Ordering::Relaxed)
    }

    fn count(&self, ack: &PublishAck) {
        if ack.duplicate {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How many acks so far.
    pub(crate) fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Everything recorded, leaving nothing behind.
    pub(crate) fn take(&self) -> Vec<(MessageId, SystemTime)> {
        std::mem::take(&mut *self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn push(&self, id: MessageId, at: SystemTime) {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, at));
    }
}

/// Publishes with `P` and records the wall-clock time of every ack.
#[derive(Debug)]
pub(crate) struct RecordingPublisher<P> {
    inner: P,
    acks: Acks,
}

impl<P> RecordingPublisher<P> {
    /// Records into `acks`.
    pub(crate) fn new(inner: P, acks: Acks) -> Self {
        Self { inner, acks }
    }
}

impl<P: Publisher> Publisher for RecordingPublisher<P> {
    async fn publish(&self, message: &OutboxMessage) -> Result<PublishAck, PublishError> {
        let ack = self.inner.publish(message).await?;
        self.acks.push(message.id, SystemTime::now());
        self.acks.count(&ack);
        Ok(ack)
    }

    async fn publish_run(&self, run: &[&OutboxMessage]) -> Vec<Result<PublishAck, PublishError>> {
        let results = self.inner.publish_run(run).await;
        let now = SystemTime::now();
        for (message, result) in run.iter().zip(&results) {
            if let Ok(ack) = result {
                self.acks.push(message.id, now);
                self.acks.count(ack);
            }
        }
        results
    }

    fn is_available(&self) -> bool {
        self.inner.is_available()
    }

    fn ack_timeout(&self) -> Option<Duration> {
        self.inner.ack_timeout()
    }
}

/// Calls, rows and time of one kind of store call.
#[derive(Debug, Default)]
pub(crate) struct Op {
    calls: AtomicU64,
    rows: AtomicU64,
    micros: AtomicU64,
}

impl Op {
    fn record(&self, rows: u64, took: Duration) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.rows.fetch_add(rows, Ordering::Relaxed);
        self.micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    /// Calls so far.
    pub(crate) fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Rows claimed or settled so far.
    pub(crate) fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }

    /// Time spent in the calls (summed over concurrent calls).
    pub(crate) fn total(&self) -> Duration {
        Duration::from_micros(self.micros.load(Ordering::Relaxed))
    }
}

/// One kind of store call's figures, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpFigures {
    /// The kind of call (`claim`, `complete`, …).
    pub(crate) name: String,
    pub(crate) calls: u64,
    pub(crate) rows: u64,
    /// Time spent in the calls (summed over concurrent calls).
    pub(crate) total: Duration,
}

/// What a [`CountingStore`] saw, by kind of call.
#[derive(Debug, Default)]
pub(crate) struct StoreCounts {
    /// The duration of every ordinary claim, in order.
    claim_times: Mutex<Vec<Duration>>,
    pub(crate) claim: Op,
    pub(crate) claim_ids: Op,
    pub(crate) complete: Op,
    pub(crate) fail: Op,
    pub(crate) release: Op,
    pub(crate) renew: Op,
    pub(crate) stats: Op,
    pub(crate) other: Op,
}

impl StoreCounts {
    /// Every kind's figures so far.
    pub(crate) fn snapshot(&self) -> Vec<OpFigures> {
        self.kinds()
            .iter()
            .map(|(name, op)| OpFigures {
                name: (*name).to_owned(),
                calls: op.calls(),
                rows: op.rows(),
                total: op.total(),
            })
            .collect()
    }

    /// Mean duration of ordinary claims in each tenth of the claims, in
    /// order: does claiming slow down as the backlog drains?
    pub(crate) fn claim_deciles(&self) -> Vec<Duration> {
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
                part.iter().sum::<Duration>() / part.len().max(1) as u32
            })
            .collect()
    }

    /// Each kind with its name.
    pub(crate) fn kinds(&self) -> [(&'static str, &Op); 8] {
        [
            ("claim", &self.claim),
            ("claim_ids", &self.claim_ids),
            ("complete", &self.complete),
            ("fail", &self.fail),
            ("release", &self.release),
            ("renew", &self.renew),
            ("stats", &self.stats),
            ("other", &self.other),
        ]
    }
}

/// Forwards to `S`, counting and timing every call.
#[derive(Debug)]
pub(crate) struct CountingStore<S> {
    inner: S,
    counts: Arc<StoreCounts>,
}

impl<S> CountingStore<S> {
    /// Counts into `counts`.
    pub(crate) fn new(inner: S, counts: Arc<StoreCounts>) -> Self {
        Self { inner, counts }
    }
}

/// Runs `call`, recording it on `op` with the rows `rows` says it touched.
async fn timed<T>(
    op: &Op,
    call: impl std::future::Future<Output = Result<T, StoreError>>,
    rows: impl FnOnce(&T) -> u64,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let result = call.await;
    let took = started.elapsed();
    op.record(result.as_ref().map_or(0, rows), took);
    result
}

impl<S: OutboxStore> OutboxStore for CountingStore<S> {
    async fn claim(&self, limit: u32, lease: Duration) -> Result<ClaimedBatch, StoreError> {
        let started = Instant::now();
        let claimed = timed(&self.counts.claim, self.inner.claim(limit, lease), |b| {
            b.messages.len() as u64
        })
        .await;
        self.counts
            .claim_times
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(started.elapsed());
        claimed
    }

    async fn claim_ids(
        &self,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<ClaimedBatch, StoreError> {
        timed(
            &self.counts.claim_ids,
            self.inner.claim_ids(ids, lease),
            |b| b.messages.len() as u64,
        )
        .await
    }

    async fn complete(
        &self,
        token: LeaseToken,
        published: &[Published],
    ) -> Result<LeaseOutcome, StoreError> {
        timed(
            &self.counts.complete,
            self.inner.complete(token, published),
            |o| o.applied,
        )
        .await
    }

    async fn fail(
        &self,
        token: LeaseToken,
        failures: &[Failure],
        policy: &RetryPolicy,
    ) -> Result<LeaseOutcome, StoreError> {
        timed(
            &self.counts.fail,
            self.inner.fail(token, failures, policy),
            |o| o.applied,
        )
        .await
    }

    async fn release(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
    ) -> Result<LeaseOutcome, StoreError> {
        timed(&self.counts.release, self.inner.release(token, ids), |o| {
            o.applied
        })
        .await
    }

    async fn renew(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<LeaseOutcome, StoreError> {
        timed(
            &self.counts.renew,
            self.inner.renew(token, ids, lease),
            |o| o.applied,
        )
        .await
    }

    async fn requeue_dead(&self, selector: DeadSelector) -> Result<u64, StoreError> {
        timed(&self.counts.other, self.inner.requeue_dead(selector), |n| {
            *n
        })
        .await
    }

    async fn skip_dead(&self, id: MessageId, note: &SkipNote) -> Result<bool, StoreError> {
        timed(&self.counts.other, self.inner.skip_dead(id, note), |&n| {
            u64::from(n)
        })
        .await
    }

    async fn purge_published(
        &self,
        older_than: Duration,
        batch_size: u32,
    ) -> Result<u64, StoreError> {
        timed(
            &self.counts.other,
            self.inner.purge_published(older_than, batch_size),
            |n| *n,
        )
        .await
    }

    async fn stats(&self) -> Result<OutboxStats, StoreError> {
        timed(&self.counts.stats, self.inner.stats(), |_| 0).await
    }
}

/// A processor wired as `Outbox::processor` wires it (this process's commit
/// listener, PostgreSQL `LISTEN`), but on a [`CountingStore`] counting into
/// `counts`. It is not offered commits leased at commit.
pub(crate) fn counted_processor<P: Publisher>(
    outbox: &txoutbox_sea_orm::Outbox,
    publisher: P,
    counts: Arc<StoreCounts>,
) -> txoutbox_core::processor::ProcessorBuilder<CountingStore<txoutbox_sea_orm::SeaOrmOutboxStore>, P>
{
    let store = CountingStore::new(outbox.store(), counts);
    let builder =
        txoutbox_core::processor::Processor::builder(store, publisher).wake_on(outbox.listen());
    match txoutbox_sea_orm::PgNotifications::new(outbox.db(), outbox.config()) {
        Some(notifications) => builder.wake_on(notifications),
        None => builder,
    }
}
