//! [`RuntimeHealth`]: the liveness and readiness of a runtime's parts, as
//! its routes serve them.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use txoutbox_core::processor::{Health, HealthProbe, HealthThresholds};
use txoutbox_nats::subscriber::{SubscriberHealth, SubscriberProbe};

use crate::streams::StreamProblems;

/// The health of a [`Runtime`](crate::Runtime)'s processor and subscribers,
/// from [`Runtime::health`](crate::Runtime::health); cheap to clone, and
/// still answering (with everything stopped) after the runtime shut down.
///
/// ```no_run
/// # async fn run(runtime: &txoutbox_axum::Runtime) {
/// let health = runtime.health();
/// if !health.liveness().live {
///     tracing::error!("a part of the outbox runtime stopped");
/// }
/// let readiness = health.readiness().await;
/// for problem in &readiness.problems {
///     tracing::warn!(%problem, "not ready");
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
    streams: StreamProblems,
    thresholds: HealthThresholds,
    probe_timeout: Duration,
    shutdown: CancellationToken,
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

/// Whether the runtime's parts do their work: what `/health/ready` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Readiness {
    /// Not shutting down, the processor healthy and every subscriber ready.
    pub ready: bool,
    /// The runtime is shutting down: not ready, so a load balancer stops
    /// sending requests while the server drains.
    pub shutting_down: bool,
    /// The processor's health, if the runtime has one.
    pub processor: Option<Health>,
    /// Each subscriber's health, in the order they were added.
    pub subscribers: Vec<SubscriberHealth>,
    /// Why it is not ready: the processor's and the subscribers' problems,
    /// and the [streams'](RuntimeHealth::stream_problems).
    pub problems: Vec<String>,
}

impl RuntimeHealth {
    pub(crate) fn new(
        processor: Option<HealthProbe>,
        subscribers: Vec<SubscriberProbe>,
        thresholds: HealthThresholds,
        probe_timeout: Duration,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                processor,
                subscribers,
                streams: StreamProblems::default(),
                thresholds,
                probe_timeout,
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

    /// Checks every part: the processor against the
    /// [thresholds](crate::RuntimeBuilder::health_thresholds) (no I/O), and
    /// every subscriber, whose consumers' info the NATS server is asked for
    /// at once, each answer waited for at most the
    /// [probe timeout](crate::RuntimeBuilder::probe_timeout).
    pub async fn readiness(&self) -> Readiness {
        let shutting_down = self.inner.shutdown.is_cancelled();
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
        let mut problems = Vec::new();
        if shutting_down {
            problems.push("shutting down".to_owned());
        }
        if let Some(processor) = &processor {
            problems.extend(processor.problems.iter().cloned());
        }
        for subscriber in &subscribers {
            problems.extend(subscriber.problems.iter().cloned());
        }
        problems.extend(self.stream_problems());
        Readiness {
            ready: problems.is_empty(),
            shutting_down,
            processor,
            subscribers,
            problems,
        }
    }
}
