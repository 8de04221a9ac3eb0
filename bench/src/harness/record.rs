//! Decorators that observe the processor from outside: a [`Publisher`] that
//! records when each message was acknowledged, and (from the testing kit)
//! an `OutboxStore` that counts and times every call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use txoutbox_core::publisher::PublishAck;
use txoutbox_core::{MessageId, OutboxMessage, PublishError, Publisher};
pub(crate) use txoutbox_testing::counting::{
    CallFigures as OpFigures, CountingStore, StoreCalls as StoreCounts,
};

/// The (message id, wall-clock ack time) pairs a [`RecordingPublisher`]
/// collected, and how many acks said the broker had the message already (a
/// re-publish absorbed by deduplication). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Acks {
    inner: Arc<Mutex<Vec<(MessageId, SystemTime)>>>,
    duplicates: Arc<AtomicU64>,
    /// Acks so far.
    acked: Arc<AtomicU64>,
    /// Counts without keeping each ack (a run too long to keep them).
    counting_only: bool,
}

impl Acks {
    /// Acks that are counted, not kept ([`take`](Self::take) returns
    /// nothing).
    pub(crate) fn counting_only() -> Self {
        Self {
            counting_only: true,
            ..Self::default()
        }
    }

    /// How many acks so far (kept or not).
    pub(crate) fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }

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
        self.acked.fetch_add(1, Ordering::Relaxed);
        if self.counting_only {
            return;
        }
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
