//! [`RuntimeBuilder`]: what a [`Runtime`] owns, and how it judges them.

use std::time::Duration;

use futures::future::{BoxFuture, Either};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;
use txoutbox_core::processor::{HealthThresholds, ProcessorHandle};
use txoutbox_nats::async_nats;
use txoutbox_nats::subscriber::{RunningSubscriber, Subscriber, SubscriberBuildError};
use txoutbox_nats::{IntoJetStream, StreamSpec};

use crate::database::DatabaseProbe;
use crate::health::{HealthParts, RuntimeHealth};
use crate::runtime::Runtime;
use crate::source::{ProcessorSource, SubscriberSource};
use crate::streams::RuntimeStreams;
use crate::{RuntimeError, gauges, metrics};

/// The longest a health check waits for the database or the NATS server by
/// default.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_millis(500);

type SpawnProcessor = BoxFuture<'static, Result<ProcessorHandle, RuntimeError>>;
type BuildSubscriber =
    BoxFuture<'static, Result<Either<Subscriber, RunningSubscriber>, SubscriberBuildError>>;

/// Builds a [`Runtime`]: from [`Runtime::builder`], then
/// [`start`](Self::start).
///
/// ```no_run
/// # async fn run(
/// #     outbox: txoutbox_core::processor::ProcessorBuilder<impl txoutbox_core::store::OutboxStore + 'static, impl txoutbox_core::publisher::Publisher>,
/// #     billing: txoutbox_nats::subscriber::SubscriberBuilder,
/// # ) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use txoutbox_axum::Runtime;
/// use txoutbox_core::processor::HealthThresholds;
///
/// let runtime = Runtime::builder()
///     .processor(outbox)          // e.g. `outbox.processor(publisher)`: built and spawned by `start`
///     .subscriber(billing)        // e.g. `Subscriber::builder(nats, "billing")...`: built by `start`
///     .health_thresholds(HealthThresholds::default().max_oldest_pending_age(Duration::from_secs(30)))
///     .start()
///     .await?;
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until `start`"]
pub struct RuntimeBuilder {
    streams: RuntimeStreams,
    processor: Option<SpawnProcessor>,
    /// Probes the processor's store, for `/health/ready`.
    database: Option<DatabaseProbe>,
    /// Clients whose connection `/health/outbox` reports.
    clients: Vec<async_nats::Client>,
    /// Whether `/health/ready` also needs the outbox's parts healthy.
    strict_readiness: bool,
    subscribers: Vec<BuildSubscriber>,
    metrics: Option<PrometheusHandle>,
    thresholds: HealthThresholds,
    probe_timeout: Duration,
    shutdown: CancellationToken,
    signals: bool,
}

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("streams", &self.streams)
            .field("processor", &self.processor.is_some())
            .field("subscribers", &self.subscribers.len())
            .field("thresholds", &self.thresholds)
            .field("probe_timeout", &self.probe_timeout)
            .field("strict_readiness", &self.strict_readiness)
            .field("signals", &self.signals)
            .finish_non_exhaustive()
    }
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        Self {
            streams: RuntimeStreams::default(),
            processor: None,
            database: None,
            clients: Vec::new(),
            strict_readiness: false,
            subscribers: Vec::new(),
            metrics: None,
            thresholds: HealthThresholds::default(),
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            shutdown: CancellationToken::new(),
            signals: true,
        }
    }
}

impl RuntimeBuilder {
    /// A stream to create, or check, with [`StreamSpec::ensure`] on
    /// `jetstream` (the service's NATS `Client`, or a
    /// `jetstream::Context`), before the processor publishes and the
    /// subscribers set up their consumers:
    ///
    /// - connected at [`start`](Self::start): ensured there; a stream that
    ///   does not fit fails the start ([`RuntimeError::Stream`]);
    /// - the broker away (a client from `NatsConnect::connect`, which
    ///   connects in the background): the service starts, and the stream
    ///   is ensured once the client connects. Until then, and if it then
    ///   does not fit (logged at error level, not retried),
    ///   [`RuntimeHealth::stream_problems`](crate::RuntimeHealth::stream_problems)
    ///   says so.
    ///
    /// A spec that cannot work whatever the server (a duplicate window
    /// not longer than the processor's lease, [`StreamSpec::check`]) fails
    /// the start either way. As many as the service needs, ensured in the
    /// order added.
    ///
    /// ```no_run
    /// # async fn run(nats: txoutbox_nats::async_nats::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use txoutbox_axum::Runtime;
    /// use txoutbox_nats::StreamSpec;
    ///
    /// let runtime = Runtime::builder()
    ///     .stream(nats.clone(), StreamSpec::new("SHOP", ["shop.>"]))
    ///     .start()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn stream(mut self, jetstream: impl IntoJetStream, spec: StreamSpec) -> Self {
        self.streams.push(jetstream.into_jetstream(), spec);
        self
    }

    /// The processor: a `ProcessorBuilder` (`outbox.processor(publisher)`,
    /// tuned as needed), a built `Processor`, or a running
    /// `ProcessorHandle`. One per runtime; a second call replaces the
    /// first.
    pub fn processor(mut self, processor: impl ProcessorSource) -> Self {
        let start = processor.spawn_processor();
        self.processor = Some(start.spawn);
        self.database = start.database;
        self
    }

    /// A subscriber: a `SubscriberBuilder` (`Subscriber::builder(..)...`,
    /// without `.build()`), a built `Subscriber`, or a `RunningSubscriber`.
    /// As many as the service has; they are built in the order added.
    pub fn subscriber(mut self, subscriber: impl SubscriberSource) -> Self {
        self.subscribers.push(subscriber.build_subscriber());
        self
    }

    /// Renders `/metrics` from this handle: the recorder the application
    /// installed itself. Without it, [`start`](Self::start) installs a
    /// `metrics-exporter-prometheus` recorder once per process (every
    /// runtime of the process shares it) and drains its histograms while
    /// the runtime runs. Install your own before anything records to also
    /// see what was recorded before `start`.
    pub fn metrics(mut self, handle: PrometheusHandle) -> Self {
        self.metrics = Some(handle);
        self
    }

    /// Makes `/health/ready` strict (default `false`): ready only while,
    /// beside the runtime not shutting down and its database answering,
    /// the processor is healthy (against the
    /// [thresholds](Self::health_thresholds)) and every subscriber ready
    /// (running, connected to NATS, its consumers present).
    ///
    /// Off by default, because the outbox keeps taking writes while the
    /// broker is away: strict, a broker outage takes every replica out of
    /// its load balancer at once. Turn it on for a service that should stop
    /// taking requests when its events stop flowing; otherwise watch
    /// `/health/outbox`, the metrics and the shipped alerts.
    pub fn strict_readiness(mut self, strict: bool) -> Self {
        self.strict_readiness = strict;
        self
    }

    /// Reports `client`'s connection in `/health/outbox` (as `broker`),
    /// beside the subscribers' clients, which are reported without it: for
    /// the client the processor publishes through when no subscriber uses
    /// it (a runtime with a processor alone). Call it once per client.
    pub fn nats_connection(mut self, client: async_nats::Client) -> Self {
        self.clients.push(client);
        self
    }

    /// What counts as a healthy processor in `/health/outbox` (default:
    /// [`HealthThresholds::default`]: a claim at most 10 s ago, no due
    /// message waiting longer than 60 s (delayed messages and those behind
    /// a dead message of their aggregate are counted apart, not aged); the
    /// oldest age is known only with the processor's `stats_interval`).
    pub fn health_thresholds(mut self, thresholds: HealthThresholds) -> Self {
        self.thresholds = thresholds;
        self
    }

    /// How long the health routes wait, at most, for the database's answer
    /// (`/health/ready`) and the NATS server's answer about each
    /// subscriber's consumer (`/health/outbox`) (default
    /// [`DEFAULT_PROBE_TIMEOUT`], 500 ms: under Kubernetes' default probe
    /// timeout of 1 s).
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }

    /// Shuts down when `token` is cancelled too (the application's own
    /// shutdown token); [`Runtime::shutdown_token`] returns it.
    pub fn shutdown_token(mut self, token: CancellationToken) -> Self {
        self.shutdown = token;
        self
    }

    /// Whether [`Runtime::shutdown_signal`] listens for SIGTERM and Ctrl-C
    /// (default `true`); with `false` it waits for the token alone, for an
    /// application that handles signals itself.
    pub fn handle_signals(mut self, signals: bool) -> Self {
        self.signals = signals;
        self
    }

    /// Ensures the [streams](Self::stream) (now, or once the broker
    /// answers), builds the subscribers (creating or verifying their
    /// consumers, or, while the broker is away, once it answers) and
    /// the processor (checking its table: a missing migration is
    /// `RuntimeError::Processor(ProcessorError::MissingSchema)`, naming what
    /// to run), installs the Prometheus recorder (unless given one),
    /// and spawns them all.
    ///
    /// On an error nothing of the runtime runs: what it had built is
    /// dropped unspawned, and a part given already running is dropped,
    /// which shuts it down in the background.
    pub async fn start(self) -> Result<Runtime, RuntimeError> {
        let (metrics, upkeep) = match self.metrics {
            Some(handle) => (handle, None),
            None => {
                let handle = metrics::installed()?;
                (handle.clone(), Some(handle))
            }
        };
        let streams = self.streams.ensure(&self.shutdown).await?;
        let mut built = Vec::with_capacity(self.subscribers.len());
        for subscriber in self.subscribers {
            built.push(subscriber.await?);
        }
        let processor = match self.processor {
            Some(spawn) => Some(spawn.await?),
            None => None,
        };
        let subscribers: Vec<RunningSubscriber> = built
            .into_iter()
            .map(|subscriber| match subscriber {
                Either::Left(built) => built.spawn(),
                Either::Right(running) => running,
            })
            .collect();
        let has_clients = !self.clients.is_empty();
        let probes: Vec<_> = subscribers.iter().map(RunningSubscriber::health).collect();
        let database = self
            .database
            .or_else(|| probes.iter().find_map(DatabaseProbe::inbox));
        let health = RuntimeHealth::new(HealthParts {
            processor: processor.as_ref().map(ProcessorHandle::health),
            subscribers: probes,
            database,
            clients: self.clients,
            thresholds: self.thresholds,
            probe_timeout: self.probe_timeout,
            strict: self.strict_readiness,
            shutdown: self.shutdown.clone(),
        })
        .with_streams(streams);
        let sampler = (!subscribers.is_empty() || has_clients)
            .then(|| tokio::spawn(gauges::sample(health.clone())));
        tracing::info!(
            processor = processor.is_some(),
            subscribers = subscribers.len(),
            "outbox runtime started"
        );
        Ok(Runtime::new(
            health,
            metrics,
            upkeep
                .map(|handle| tokio::spawn(metrics::upkeep(handle)))
                .into_iter()
                .chain(sampler)
                .collect(),
            processor,
            subscribers,
            self.shutdown,
            self.signals,
        ))
    }
}
