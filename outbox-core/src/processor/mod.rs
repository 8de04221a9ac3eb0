//! The processor: takes committed outbox messages to the broker, at least
//! once, in per-aggregate order, without losing any.
//!
//! It is generic over the [`OutboxStore`] (the outbox table: `outbox-sea-orm`
//! for PostgreSQL, MySQL/MariaDB and SQLite) and the [`Publisher`] (the
//! broker: `outbox-nats` for JetStream). Run as many as you like, in one or
//! many processes, on one outbox: leases with fencing tokens decide who
//! publishes what; there is no leader.
//!
//! # How it works
//!
//! - **Wake-ups, not polling load.** [`WakeSource`]s push into a
//!   [`WakeHandle`]: in this process, the ids of just-committed messages
//!   (leased by primary key, no query to find them); across processes, a
//!   database notification; a fallback claim every `poll_interval`.
//! - **Overlapped batches.** One claim statement leases up to `batch_size`
//!   messages; while a batch is being published the next one is claimed, and
//!   the previous one completed with one statement.
//! - **Order.** Messages of one aggregate are published one after another
//!   (the next only after the broker acknowledged the previous); aggregates
//!   in parallel, with up to `max_in_flight` acks outstanding. The store never
//!   hands out a message while an earlier one of its aggregate is
//!   unpublished, so a failed message holds back only its own aggregate.
//! - **Failures.** An unavailable broker releases the batch without
//!   spending attempts and pauses the processor until the publisher says the
//!   broker is back; a rejected message spends an attempt, backs off
//!   exponentially with jitter, and goes `dead` with its reason when the
//!   attempts run out.
//! - **Database outages.** Once a statement fails, or runs for a second
//!   without the database answering a probe ([`OutboxStore::probe`], 1 s
//!   timeout), the processor claims nothing and keeps what it published and
//!   could not record in memory (at most the batches it had in flight; see
//!   [`Health::unrecorded`]); it probes every 250 ms, and when the database
//!   answers records that first, then claims a second later (other
//!   processors record theirs meanwhile): a long outage publishes nothing
//!   twice, and the processor is back within a second or two.
//! - **Crashes.** A message whose claims keep ending without a settlement
//!   (its processor crashed, was killed or hung while holding it) is
//!   published in isolation, in ever smaller groups, and goes `dead` after
//!   [`ABANDONED_LIMIT`] such claims: a message that kills every processor
//!   handling it cannot crash-loop the fleet.
//! - **Shutdown** stops claiming, waits for the acks in flight up to
//!   `shutdown_timeout`, records them, and releases everything else: no row is
//!   left leased.
//!
//! # Example
//!
//! ```no_run
//! # use txoutbox_core::{OutboxStore, Publisher};
//! # async fn run(store: impl OutboxStore + 'static, publisher: impl Publisher) -> Result<(), Box<dyn std::error::Error>> {
//! use txoutbox_core::processor::Processor;
//! use std::time::Duration;
//!
//! let processor = Processor::builder(store, publisher)
//!     .batch_size(500)
//!     .poll_interval(Duration::from_millis(500))
//!     .build()?
//!     .spawn();
//! // ... serve requests ...
//! let report = processor.shutdown().await?;
//! println!("published {}", report.published);
//! # Ok(()) }
//! ```

mod abandoned;
mod batch;
mod builder;
mod cleanup;
mod config;
mod engine;
mod health;
pub mod metrics;
mod sync;
mod unrecorded;
mod wake;

pub use abandoned::ABANDONED_LIMIT;
pub use builder::ProcessorBuilder;
pub use config::{DEFAULT_LEASE, ProcessorBuildError, ProcessorConfig};
pub use health::{Health, HealthProbe, HealthThresholds};
pub use wake::{FAST_PATH_CAPACITY, WakeHandle, WakeSource};

/// The lease-at-commit protocol, for store implementations (`outbox-sea-orm`):
/// a writer in the processor's process writes its outbox rows already leased
/// to the processor and hands them over after the commit. Not part of the
/// public API: outside semver, it may change in any release.
#[doc(hidden)]
pub mod __handover {
    pub use super::wake::handover::{HANDOVER_CAPACITY, HandoverRefused, LeaseOffer, LeasedCommit};
}

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::publisher::{PublishErrorKind, Publisher};
use crate::store::{MissingSchema, OutboxStore};

type SourceTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Takes committed outbox messages to the broker. Build one with
/// [`Processor::builder`], then [`spawn`](Processor::spawn) it or
/// [`run`](Processor::run) it until a cancellation token fires.
pub struct Processor<S, P> {
    store: Arc<S>,
    publisher: Arc<P>,
    config: ProcessorConfig,
    wake: WakeHandle,
    sources: Vec<SourceTask>,
    cleanup: Option<cleanup::PublishedCleanup>,
    health: HealthProbe,
    destination: Option<String>,
}

impl<S, P> std::fmt::Debug for Processor<S, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processor")
            .field("config", &self.config)
            .field("wake_sources", &self.sources.len())
            .finish_non_exhaustive()
    }
}

/// What a processor did, returned when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessorReport {
    /// Batches claimed (empty claims not counted).
    pub batches: u64,
    /// Messages the broker acknowledged.
    pub published: u64,
    /// Publishes the broker rejected (each spent an attempt).
    pub failed: u64,
    /// Messages that went `dead`.
    pub dead: u64,
    /// Claimed messages given back unpublished.
    pub released: u64,
}

/// The processor's task stopped abnormally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessorError {
    /// The task panicked or was aborted; leased messages become claimable
    /// again when their lease runs out.
    #[error("the outbox processor task failed")]
    Task(#[from] tokio::task::JoinError),
    /// The outbox table is missing, or lacks columns this version needs:
    /// the processor checked as it started
    /// ([`OutboxStore::check_schema`]) and stopped at once, logging this at
    /// error level and reporting it in its [`Health`]. The error names
    /// what to run (a migration, a command).
    #[error("the outbox processor cannot start")]
    MissingSchema(#[source] MissingSchema),
    /// Nothing on the broker stores what the processor would publish (no
    /// stream captures its subjects), found by [`Processor::check`]: the
    /// reason names what to create.
    #[error("the outbox processor has nowhere to publish")]
    NoDestination(#[source] crate::publisher::PublishError),
}

impl<S: OutboxStore + 'static, P: Publisher> Processor<S, P> {
    /// A builder with the [default settings](ProcessorConfig).
    pub fn builder(store: S, publisher: P) -> ProcessorBuilder<S, P> {
        ProcessorBuilder::new(store, publisher)
    }

    /// The handle that wakes this processor, for wake-ups the application
    /// sends itself (e.g. after committing messages on its own transaction).
    pub fn wake_handle(&self) -> WakeHandle {
        self.wake.clone()
    }

    /// The settings.
    pub fn config(&self) -> &ProcessorConfig {
        &self.config
    }

    /// Its [`HealthProbe`]: whether it makes progress.
    pub fn health(&self) -> HealthProbe {
        self.health.clone()
    }

    /// The store it claims from, shared: for a service's own checks of the
    /// database (e.g. [`OutboxStore::probe`] behind a readiness route).
    pub fn store(&self) -> Arc<S> {
        Arc::clone(&self.store)
    }

    /// Checks, once, what the processor needs before it runs, for a start
    /// that should fail at once rather than when the processor runs:
    ///
    /// - the store's table ([`OutboxStore::check_schema`]): a missing table
    ///   or column is [`ProcessorError::MissingSchema`], naming what to
    ///   run;
    /// - its [destination](ProcessorBuilder::destination), if set: nothing
    ///   on the broker storing it is [`ProcessorError::NoDestination`],
    ///   naming what to create.
    ///
    /// A database or broker that cannot answer is not an error here
    /// (logged): [`run`](Self::run) checks the table again, retrying until
    /// the database answers, and waits for a broker that is not connected
    /// ([`Publisher::is_available`]) as during an outage: the destination
    /// is not checked then.
    ///
    /// ```no_run
    /// # async fn run(processor: txoutbox_core::Processor<impl txoutbox_core::OutboxStore + 'static, impl txoutbox_core::Publisher>) -> Result<(), Box<dyn std::error::Error>> {
    /// processor.check().await?; // `outbox migrate` not run, or no stream: fails here, naming it
    /// let running = processor.spawn();
    /// # Ok(()) }
    /// ```
    pub fn check(&self) -> impl Future<Output = Result<(), ProcessorError>> + Send + 'static {
        let store = Arc::clone(&self.store);
        let publisher = Arc::clone(&self.publisher);
        let destination = self.destination.clone();
        async move {
            check_schema_once(&*store).await?;
            match destination {
                Some(subjects) => check_destination_once(&*publisher, &subjects).await,
                None => Ok(()),
            }
        }
    }

    /// Runs until `shutdown` is cancelled, then stops gracefully (see the
    /// [module docs](self)). It first checks the store's table
    /// ([`OutboxStore::check_schema`], retried while the database cannot
    /// answer) and returns [`ProcessorError::MissingSchema`] at once when
    /// it is missing or incomplete: `build()` makes no I/O, so this is
    /// where a missing migration shows, within the first round trip.
    ///
    /// ```no_run
    /// # async fn run(processor: txoutbox_core::Processor<impl txoutbox_core::OutboxStore + 'static, impl txoutbox_core::Publisher>) {
    /// use txoutbox_core::processor::ProcessorError;
    /// let shutdown = tokio_util::sync::CancellationToken::new();
    /// match processor.run(shutdown).await {
    ///     Ok(report) => println!("published {}", report.published),
    ///     Err(ProcessorError::MissingSchema(missing)) => eprintln!("{missing}"), // what to run
    ///     Err(err) => eprintln!("{err}"),
    /// }
    /// # }
    /// ```
    pub async fn run(
        mut self,
        shutdown: CancellationToken,
    ) -> Result<ProcessorReport, ProcessorError> {
        let stop = shutdown.child_token();
        let cleanup = self.cleanup.take();
        let cleaning = async {
            if let Some(cleanup) = cleanup {
                cleanup.run(stop.clone()).await;
            }
        };
        let processing = async {
            let report = engine::run(self, shutdown).await;
            stop.cancel(); // ends the cleanup
            report
        };
        let (report, ()) = tokio::join!(processing, cleaning);
        report
    }

    /// Runs on a new tokio task.
    pub fn spawn(self) -> ProcessorHandle {
        let shutdown = CancellationToken::new();
        let wake = self.wake.clone();
        let health = self.health.clone();
        let task = tokio::spawn(self.run(shutdown.clone()));
        ProcessorHandle {
            shutdown,
            wake,
            health,
            task: Some(task),
        }
    }
}

/// A running processor, from [`Processor::spawn`]. Dropping it starts a
/// graceful shutdown that completes in the background, as dropping the
/// subscriber's `RunningSubscriber` does: keep the handle for as long as
/// the processor should run, and prefer [`shutdown`](Self::shutdown),
/// which waits for it and returns its report.
#[derive(Debug)]
pub struct ProcessorHandle {
    shutdown: CancellationToken,
    wake: WakeHandle,
    health: HealthProbe,
    task: Option<JoinHandle<Result<ProcessorReport, ProcessorError>>>,
}

impl ProcessorHandle {
    /// Stops claiming, waits for acks in flight (up to the shutdown
    /// timeout), records them and releases the rest. Returns
    /// [`ProcessorError::MissingSchema`] if the processor could not start
    /// (see [`Processor::run`]).
    pub async fn shutdown(mut self) -> Result<ProcessorReport, ProcessorError> {
        self.shutdown.cancel();
        match self.task.take() {
            Some(task) => task.await?,
            None => Ok(ProcessorReport::default()),
        }
    }

    /// The token that stops the processor when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Wakes the processor (see [`Processor::wake_handle`]).
    pub fn wake_handle(&self) -> WakeHandle {
        self.wake.clone()
    }

    /// Its [`HealthProbe`] (see [`Processor::health`]).
    pub fn health(&self) -> HealthProbe {
        self.health.clone()
    }

    /// Whether the processor's task has ended.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

impl Drop for ProcessorHandle {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.shutdown.cancel();
        }
    }
}

/// One schema check (see [`Processor::check_schema`]).
async fn check_schema_once<S: OutboxStore>(store: &S) -> Result<(), ProcessorError> {
    match store.check_schema().await {
        Ok(()) => Ok(()),
        Err(err) => match err.missing_schema() {
            Some(missing) => Err(ProcessorError::MissingSchema(missing.clone())),
            None => {
                tracing::warn!(
                    error = %crate::ErrorChain(&err),
                    "outbox processor could not check its table yet; it checks again as it runs"
                );
                Ok(())
            }
        },
    }
}

/// One destination check (see [`Processor::check`]).
async fn check_destination_once<P: Publisher>(
    publisher: &P,
    subjects: &str,
) -> Result<(), ProcessorError> {
    if !publisher.is_available() {
        // Not connected yet (a broker away at start): asking would only
        // wait for a timeout. The processor waits for the broker as it
        // runs, as during an outage.
        tracing::info!(
            subjects,
            "outbox processor starts while the broker is away; it publishes once it answers"
        );
        return Ok(());
    }
    match publisher.check_destination(subjects).await {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == PublishErrorKind::Unavailable => {
            tracing::warn!(
                subjects,
                error = %crate::ErrorChain(&err),
                "outbox processor could not check where it publishes"
            );
            Ok(())
        }
        Err(err) => Err(ProcessorError::NoDestination(err)),
    }
}
