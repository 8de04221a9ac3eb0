//! [`RuntimeHealth`]: the liveness and readiness of a runtime, and its
//! outbox's own state, as its routes serve them.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use txoutbox_core::processor::{HealthProbe, HealthThresholds};
use txoutbox_nats::async_nats;
use txoutbox_nats::subscriber::SubscriberProbe;
use txoutbox_nats::{BrokerConnection, OutboxHealth};

use crate::database::{DatabaseProbe, DatabaseStatus};
use crate::streams::StreamProblems;

/// The health of a [`Runtime`](crate::Runtime): whether it should be
/// restarted ([`liveness`](Self::liveness)), whether it should receive
/// requests ([`readiness`](Self::readiness)), and how its outbox does
/// ([`outbox`](Self::outbox)). From
/// [`Runtime::health`](crate::Runtime::health); cheap to clone, and still
/// answering (with everything stopped) after the runtime shut down.
///
/// ```no_run
/// # async fn run(runtime: &txoutbox_axum::Runtime) {
/// let health = runtime.health();
/// if !health.liveness().live {
///     tracing::error!("a part of the outbox runtime stopped");
/// }
/// let outbox = health.outbox().await;
/// for problem in &outbox.problems {
///     tracing::warn!(%problem, "outbox degraded"); // the broker away, a stalled processor, ...
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RuntimeHealth {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    processor: Option<HealthProbe>,
    subscribers: Vec<SubscriberProbe>,
    database: Option<DatabaseProbe>,
    /// Clients whose connection is reported beside the subscribers' own.
    clients: Vec<async_nats::Client>,
    streams: StreamProblems,
    thresholds: HealthThresholds,
    probe_timeout: Duration,
    strict: bool,
    shutdown: CancellationToken,
}

/// What a [`RuntimeHealth`] is made of, from the builder.
#[derive(Debug)]
pub(crate) struct HealthParts {
    pub(crate) processor: Option<HealthProbe>,
    pub(crate) subscribers: Vec<SubscriberProbe>,
    pub(crate) database: Option<DatabaseProbe>,
    pub(crate) clients: Vec<async_nats::Client>,
    pub(crate) thresholds: HealthThresholds,
    pub(crate) probe_timeout: Duration,
    pub(crate) strict: bool,
    pub(crate) shutdown: CancellationToken,
}

/// Whether the runtime's parts run: what `/health/live` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Liveness {
    /// Every part's task runs, or the runtime is shutting down.
    pub live: bool,
    /// The runtime is shutting down (its token was cancelled).
    pub shutting_down: bool,
    /// Which part stopped, one line each.
    pub problems: Vec<String>,
}

/// Whether this process should receive requests: what `/health/ready`
/// answers.
///
/// By default it is ready when it is not shutting down and its database
/// answers: the outbox takes writes while the broker is away, so a broker
/// outage, a subscriber's lag or a backlog leave it ready (they show in
/// [`OutboxHealth`], the metrics and the alerts). With
/// [`strict_readiness`](crate::RuntimeBuilder::strict_readiness), the
/// outbox's parts must be healthy too.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Readiness {
    /// Not shutting down, the database not down (and, when strict, the
    /// processor healthy and every subscriber ready).
    pub ready: bool,
    /// The runtime is shutting down: not ready, so a load balancer stops
    /// sending requests while the server drains.
    pub shutting_down: bool,
    /// The database, probed with the
    /// [probe timeout](crate::RuntimeBuilder::probe_timeout).
    pub database: DatabaseStatus,
    /// Whether the outbox's parts count
    /// ([`strict_readiness`](crate::RuntimeBuilder::strict_readiness)).
    pub strict: bool,
    /// When strict, the outbox's state the answer took into account.
    pub outbox: Option<OutboxHealth>,
    /// Why it is not ready, one line each.
    pub problems: Vec<String>,
}

impl RuntimeHealth {
    pub(crate) fn new(parts: HealthParts) -> Self {
        let HealthParts {
            processor,
            subscribers,
            database,
            clients,
            thresholds,
            probe_timeout,
            strict,
            shutdown,
        } = parts;
        Self {
            inner: Arc::new(Inner {
                processor,
                subscribers,
                database,
                clients,
                streams: StreamProblems::default(),
                thresholds,
                probe_timeout,
                strict,
                shutdown,
            }),
        }
    }

    /// The same, reporting `streams`' problems: called on a health just
    /// made, before it is shared.
    pub(crate) fn with_streams(mut self, streams: StreamProblems) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.streams = streams,
            None => tracing::error!("the runtime's health was shared before its streams were set"),
        }
        self
    }

    /// Whether every part's task runs (no I/O). A part that stopped on its
    /// own (a processor task that panicked, a subscriber whose consumer was
    /// deleted) makes the process not live, so the orchestrator restarts
    /// it; while the runtime shuts down it stays live, so the orchestrator
    /// lets it finish.
    pub fn liveness(&self) -> Liveness {
        let shutting_down = self.inner.shutdown.is_cancelled();
        let mut problems = Vec::new();
        if let Some(processor) = &self.inner.processor
            && !processor.check(&self.inner.thresholds).running
        {
            problems.push("the processor has stopped".to_owned());
        }
        for subscriber in &self.inner.subscribers {
            if !subscriber.is_running() {
                problems.push(format!("subscriber {} has stopped", subscriber.durable()));
            }
        }
        Liveness {
            live: shutting_down || problems.is_empty(),
            shutting_down,
            problems,
        }
    }

    /// What keeps the runtime's [streams](crate::RuntimeBuilder::stream)
    /// from being used, one line each (no I/O): a stream not ensured yet
    /// because the broker has not answered since the start, or one that
    /// turned out not to fit once it did (logged at error level too).
    pub fn stream_problems(&self) -> Vec<String> {
        self.inner.streams.lines()
    }

    /// Each subscriber's `(stream, durable)`, in the order they were added.
    #[cfg(feature = "console")]
    pub(crate) fn subscriber_names(&self) -> Vec<(String, String)> {
        self.inner
            .subscribers
            .iter()
            .map(|probe| (probe.stream().to_owned(), probe.durable().to_owned()))
            .collect()
    }

    /// Whether this process should receive requests: not shutting down,
    /// and its database answering within the
    /// [probe timeout](crate::RuntimeBuilder::probe_timeout) (the
    /// processor's store, or a subscriber's inbox; not checked for a
    /// runtime with neither). With
    /// [`strict_readiness`](crate::RuntimeBuilder::strict_readiness), also
    /// the processor healthy and every subscriber ready (running,
    /// connected, its consumers present): the [outbox](Self::outbox)'s
    /// checks, whose problems it lists.
    pub async fn readiness(&self) -> Readiness {
        let shutting_down = self.inner.shutdown.is_cancelled();
        let (database, outbox) = if self.inner.strict {
            let (database, outbox) = futures::join!(self.database(), self.outbox());
            (database, Some(outbox))
        } else {
            (self.database().await, None)
        };
        let mut problems = Vec::new();
        if shutting_down {
            problems.push("shutting down".to_owned());
        }
        if let DatabaseStatus::Down(error) = &database {
            problems.push(format!("the database does not answer: {error}"));
        }
        if let Some(outbox) = &outbox {
            if let Some(processor) = &outbox.processor {
                problems.extend(processor.problems.iter().cloned());
            }
            for subscriber in &outbox.subscribers {
                problems.extend(subscriber.problems.iter().cloned());
            }
            problems.extend(outbox.streams.iter().cloned());
        }
        Readiness {
            ready: problems.is_empty(),
            shutting_down,
            database,
            strict: self.inner.strict,
            outbox,
            problems,
        }
    }

    /// The outbox's own state: the connection to NATS, the processor
    /// against the [thresholds](crate::RuntimeBuilder::health_thresholds)
    /// (no I/O), and every subscriber, whose consumers' info the NATS
    /// server is asked for at once, each answer waited for at most the
    /// [probe timeout](crate::RuntimeBuilder::probe_timeout) (not asked
    /// while disconnected).
    pub async fn outbox(&self) -> OutboxHealth {
        let processor = self
            .inner
            .processor
            .as_ref()
            .map(|probe| probe.check(&self.inner.thresholds));
        let subscribers = futures::future::join_all(
            self.inner
                .subscribers
                .iter()
                .map(|probe| probe.check(self.inner.probe_timeout)),
        )
        .await;
        let broker = BrokerConnection::worst(
            self.inner
                .clients
                .iter()
                .map(async_nats::Client::connection_state)
                .chain(
                    self.inner
                        .subscribers
                        .iter()
                        .map(SubscriberProbe::connection_state),
                ),
        );
        OutboxHealth::judge(broker, processor, subscribers, self.stream_problems())
    }

    async fn database(&self) -> DatabaseStatus {
        match &self.inner.database {
            Some(probe) => probe.check(self.inner.probe_timeout).await,
            None => DatabaseStatus::Unchecked,
        }
    }
}
