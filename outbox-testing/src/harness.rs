//! [`TestOutbox`]: an in-memory store, a publisher and a clock wired to the
//! real processor, driven by a test.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;
use txoutbox_core::processor::ProcessorBuildError;
use txoutbox_core::{
    AggregateRoot, IntegrationEvent, MessageContext, MessageId, OutboxMessage, Processor,
    Publisher, RetryPolicy,
};

use crate::clock::TestClock;
use crate::memory_publisher::MemoryPublisher;
use crate::memory_store::{MemoryStore, WriteError};
use crate::typed::{PublishedEvent, events_of};

/// How long [`TestOutbox::drain`] waits for the processor by default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A service's outbox in a unit test: a [`MemoryStore`], a publisher (a
/// [`MemoryPublisher`] unless the test wraps one in faults), a
/// [`TestClock`], and [`drain`](TestOutbox::drain), which runs the real
/// [`Processor`] until nothing is left to publish now.
///
/// ```
/// # use txoutbox_core::{AggregateRoot, EventBuffer, IntegrationEvent};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
/// # #[event(name = "doc.harness.order.placed")]
/// # struct OrderPlaced { order_id: u64 }
/// # #[derive(AggregateRoot)]
/// # #[aggregate(type = "order")]
/// # struct Order { #[aggregate(id)] id: u64, events: EventBuffer }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use txoutbox_testing::TestOutbox;
///
/// let outbox = TestOutbox::new();
/// let mut order = Order { id: 7, events: EventBuffer::new() };
/// order.record(OrderPlaced { order_id: 7 })?;
/// outbox.save(&mut order)?;
///
/// let published = outbox.drain().await?;
/// assert_eq!(published.len(), 1);
/// assert_eq!(outbox.publisher().events::<OrderPlaced>(), [OrderPlaced { order_id: 7 }]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TestOutbox<P = MemoryPublisher> {
    store: MemoryStore,
    publisher: P,
    retry: RetryPolicy,
    drain_timeout: Duration,
}

/// [`TestOutbox::drain`] could not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DrainError {
    /// The processor refused its settings.
    #[error(transparent)]
    Build(#[from] ProcessorBuildError),
    /// Messages were still publishable (or leased) when the time ran out:
    /// the publisher keeps failing as unavailable, or a lease never ends.
    #[error(
        "after {waited:?}, {left} message(s) were still being published or publishable: \
         is the publisher unavailable?"
    )]
    Stuck {
        /// How long the drain waited.
        waited: Duration,
        /// Pending messages at that moment.
        left: usize,
    },
    /// The processor stopped with an error.
    #[error("the processor stopped: {0}")]
    Processor(String),
}

impl TestOutbox<MemoryPublisher> {
    /// An empty outbox publishing into a [`MemoryPublisher`].
    pub fn new() -> Self {
        Self::with_publisher(MemoryPublisher::new())
    }
}

impl Default for TestOutbox<MemoryPublisher> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Publisher + Clone> TestOutbox<P> {
    /// An empty outbox publishing through `publisher` (e.g. a
    /// [`MemoryPublisher`] wrapped in faults).
    pub fn with_publisher(publisher: P) -> Self {
        Self {
            store: MemoryStore::new(),
            publisher,
            retry: RetryPolicy::default(),
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }

    /// The retry policy the processor runs with (default:
    /// [`RetryPolicy::default`]).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// How long a drain may take before it fails as stuck.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// The store.
    pub fn store(&self) -> &MemoryStore {
        &self.store
    }

    /// The publisher.
    pub fn publisher(&self) -> &P {
        &self.publisher
    }

    /// The clock the store decides by: advance it past a backoff, then
    /// drain again.
    pub fn clock(&self) -> &TestClock {
        self.store.clock()
    }

    /// Saves an aggregate's recorded events (see [`MemoryStore::save`]).
    pub fn save<A: AggregateRoot>(&self, aggregate: &mut A) -> Result<Vec<MessageId>, WriteError> {
        self.store.save(aggregate)
    }

    /// Saves with a context (see [`MemoryStore::save_with`]).
    pub fn save_with<A: AggregateRoot>(
        &self,
        aggregate: &mut A,
        context: &MessageContext,
    ) -> Result<Vec<MessageId>, WriteError> {
        self.store.save_with(aggregate, context)
    }

    /// Writes a standalone event (see [`MemoryStore::enqueue`]).
    pub fn enqueue<E: IntegrationEvent>(&self, event: &E) -> Result<MessageId, WriteError> {
        self.store.enqueue(event)
    }

    /// Runs the real processor until nothing is publishable now and nothing
    /// is leased, then stops it; returns the messages published during the
    /// drain (per aggregate by sequence). Messages backing off after a
    /// failure, delayed ones and dead ones stay: advance the
    /// [`clock`](TestOutbox::clock) and drain again.
    pub async fn drain(&self) -> Result<Vec<OutboxMessage>, DrainError> {
        let before: HashSet<MessageId> = self.store.published().iter().map(|m| m.id).collect();
        let handle = Processor::builder(self.store.clone(), self.publisher.clone())
            .poll_interval(Duration::from_millis(2))
            .gather(Duration::ZERO)
            .unavailable_backoff(Duration::from_millis(5), Duration::from_millis(50))
            .shutdown_timeout(Duration::from_secs(1))
            .stats_interval(None)
            .retry(self.retry)
            .build()?
            .spawn();
        let started = Instant::now();
        // The processor's first claim may not have run yet: a store with
        // nothing to do now is drained only once it stays so for a while.
        let mut idle_since: Option<Instant> = None;
        loop {
            if self.store.has_work_now() {
                idle_since = None;
            } else if idle_since.get_or_insert_with(Instant::now).elapsed()
                >= Duration::from_millis(10)
            {
                break;
            }
            if started.elapsed() > self.drain_timeout {
                let left = self.store.pending().len();
                let _ = handle.shutdown().await;
                return Err(DrainError::Stuck {
                    waited: self.drain_timeout,
                    left,
                });
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        finish_drain(handle, &before, || self.store.published()).await
    }

    /// [`drain`](TestOutbox::drain), then the events of type `E` it
    /// published, decoded, with their envelopes.
    ///
    /// # Panics
    /// When a message of `E`'s name does not decode into `E`.
    pub async fn drain_events<E: IntegrationEvent>(
        &self,
    ) -> Result<Vec<PublishedEvent<E>>, DrainError> {
        Ok(events_of(self.drain().await?))
    }
}

/// Stops a drain's processor and returns what `published` lists that was
/// not in `before`: the messages published during the drain.
pub(crate) async fn finish_drain(
    handle: txoutbox_core::ProcessorHandle,
    before: &HashSet<MessageId>,
    published: impl FnOnce() -> Vec<OutboxMessage>,
) -> Result<Vec<OutboxMessage>, DrainError> {
    handle
        .shutdown()
        .await
        .map_err(|err| DrainError::Processor(txoutbox_core::ErrorChain(&err).to_string()))?;
    Ok(published()
        .into_iter()
        .filter(|m| !before.contains(&m.id))
        .collect())
}
