//! [`ProcessorBuilder`]: every knob, each with its default.

use std::sync::Arc;
use std::time::Duration;

use super::cleanup::PublishedCleanup;
use super::config::{ProcessorBuildError, ProcessorConfig};
use super::health::HealthProbe;
use super::wake::{WakeHandle, WakeSource};
use super::{Processor, SourceTask};
use crate::cleanup::Cleanup;
use crate::publisher::Publisher;
use crate::store::{OutboxStore, RetryPolicy};

/// Configures a [`Processor`]. Defaults are in [`ProcessorConfig`].
pub struct ProcessorBuilder<S, P> {
    store: S,
    publisher: P,
    config: ProcessorConfig,
    wake: WakeHandle,
    sources: Vec<SourceTask>,
    cleanup: Option<PublishedCleanup>,
    destination: Option<String>,
}

impl<S, P> std::fmt::Debug for ProcessorBuilder<S, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessorBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S: OutboxStore + 'static, P: Publisher> ProcessorBuilder<S, P> {
    pub(super) fn new(store: S, publisher: P) -> Self {
        Self {
            store,
            publisher,
            config: ProcessorConfig::default(),
            wake: WakeHandle::default(),
            sources: Vec::new(),
            cleanup: None,
            destination: None,
        }
    }

    /// Messages per claim (default 1,000).
    pub fn batch_size(mut self, size: u32) -> Self {
        self.config.batch_size = size;
        self
    }

    /// Claimed batches published at once, so claiming, publishing and
    /// completing overlap (default 3).
    pub fn batches_in_flight(mut self, batches: usize) -> Self {
        self.config.batches_in_flight = batches;
        self
    }

    /// Publishes awaiting the broker's ack at once, over all batches
    /// (default 4,096). Bounds memory and the broker's pending acks.
    pub fn max_in_flight(mut self, publishes: usize) -> Self {
        self.config.max_in_flight = publishes;
        self
    }

    /// How long a claim is held (default 3 s, 1 s to 24 h, and at least 5 x
    /// the publisher's [ack timeout](Publisher::ack_timeout)); renewed every
    /// third of it while the batch is in flight. A processor that dies
    /// holding messages holds their aggregates up for about this long. Keep
    /// the broker's deduplication window longer than this.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// While a batch is publishing, how long messages committed in this
    /// process may wait for more to join them in one claim (default 2 ms).
    /// When nothing is in flight they are claimed at once, so a quiet
    /// service sees no delay; under load, fewer and larger claims cost the
    /// database less. `Duration::ZERO` claims every wake-up at once.
    pub fn gather(mut self, gather: Duration) -> Self {
        self.config.gather = gather;
        self
    }

    /// The fallback claim interval when no wake-up comes (default 1 s).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.config.poll_interval = interval;
        self
    }

    /// Attempts and backoff for messages the broker rejects (default: 10
    /// attempts, 1 s doubling to 5 min, with jitter).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.config.retry = policy;
        self
    }

    /// The global pause while the broker is unavailable: `first`, doubling up
    /// to `max` (default 100 ms to 5 s). The processor resumes at once when
    /// the publisher reports the broker back, and pauses start at `first`
    /// again from there (a restarted server may refuse to store for a
    /// moment while it recovers its streams).
    pub fn unavailable_backoff(mut self, first: Duration, max: Duration) -> Self {
        self.config.unavailable_backoff = (first, max);
        self
    }

    /// How long shutdown waits for acks in flight (default 10 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.config.shutdown_timeout = timeout;
        self
    }

    /// How often the backlog gauges are refreshed from
    /// [`OutboxStore::stats`] (default 15 s; `None`: never).
    pub fn stats_interval(mut self, interval: Option<Duration>) -> Self {
        self.config.stats_interval = interval;
        self
    }

    /// All settings at once.
    pub fn config(mut self, config: ProcessorConfig) -> Self {
        self.config = config;
        self
    }

    /// Adds a source of wake-ups (commits in this process, database
    /// notifications). Without any, the processor polls.
    pub fn wake_on(mut self, source: impl WakeSource) -> Self {
        self.sources.push(Box::pin(source.run(self.wake.clone())));
        self
    }

    /// Deletes no published rows: they stay until someone purges them
    /// (`outbox purge`, [`OutboxStore::purge_published`]).
    pub fn without_cleanup(mut self) -> Self {
        self.cleanup = None;
        self
    }

    /// The cleanup the processor will run, if any (see
    /// [`cleanup`](Self::cleanup)).
    pub fn cleanup_schedule(&self) -> Option<Cleanup> {
        self.cleanup.as_ref().map(PublishedCleanup::schedule)
    }

    /// The handle that wakes the processor being built.
    pub fn wake_handle(&self) -> WakeHandle {
        self.wake.clone()
    }

    /// The subjects the processor publishes under (a subject or a
    /// wildcard, e.g. `shop.>`), for [`Processor::check`]: it asks the
    /// publisher whether the broker stores them
    /// ([`Publisher::check_destination`]). `txoutbox_sea_orm::Outbox::processor`
    /// sets it to `<subject prefix>.>` when an event type of the program
    /// derives its subject from the prefix; without it nothing is checked.
    pub fn destination(mut self, subjects: impl Into<String>) -> Self {
        self.destination = Some(subjects.into());
        self
    }

    /// No [destination](Self::destination) check: for a processor whose
    /// subjects the broker stores in a way the check cannot see.
    pub fn without_destination_check(mut self) -> Self {
        self.destination = None;
        self
    }

    /// Checks the settings and builds the processor.
    pub fn build(self) -> Result<Processor<S, P>, ProcessorBuildError> {
        self.config.validate(self.publisher.ack_timeout())?;
        Ok(Processor {
            store: Arc::new(self.store),
            publisher: Arc::new(self.publisher),
            config: self.config,
            wake: self.wake,
            sources: self.sources,
            cleanup: self.cleanup,
            health: HealthProbe::default(),
            destination: self.destination,
        })
    }
}

impl<S: OutboxStore + Clone + 'static, P: Publisher> ProcessorBuilder<S, P> {
    /// Deletes published rows older than [`Cleanup::older_than`] every
    /// [`Cleanup::every`], in bounded batches
    /// ([`OutboxStore::purge_published`]), while the processor runs
    /// (several processors may all do it: the batches do not conflict).
    /// A store that deletes rows as they are published has none to delete.
    ///
    /// A processor from `txoutbox_sea_orm::Outbox::processor` does this by
    /// default ([`Cleanup::default`]: 7 days, hourly);
    /// [`without_cleanup`](Self::without_cleanup) turns it off.
    ///
    /// ```
    /// # use txoutbox_core::processor::ProcessorBuilder;
    /// # use txoutbox_core::store::OutboxStore;
    /// # fn tune<S: OutboxStore + Clone + 'static, P: txoutbox_core::Publisher>(builder: ProcessorBuilder<S, P>) -> ProcessorBuilder<S, P> {
    /// use std::time::Duration;
    /// use txoutbox_core::cleanup::Cleanup;
    /// builder.cleanup(Cleanup::keep_for(Duration::from_secs(30 * 24 * 3600)))
    /// # }
    /// ```
    pub fn cleanup(mut self, cleanup: Cleanup) -> Self {
        self.cleanup = Some(PublishedCleanup::new(self.store.clone(), cleanup));
        self
    }
}
