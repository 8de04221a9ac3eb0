//! What the outage part watches from inside the processor's process: every
//! publish call the processor makes (when, and how it ended) through a
//! [`Publisher`] decorator, and the NATS client's connection state, sampled
//! every 5 ms.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::Client;
use async_nats::connection::State;
use tokio::time::Instant;
use txoutbox_core::publisher::{PublishAck, PublishErrorKind};
use txoutbox_core::{OutboxMessage, PublishError, Publisher};

/// How often the connection state is sampled.
const STATE_SAMPLE: Duration = Duration::from_millis(5);

/// How a publish call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// At least one message acknowledged.
    Acked,
    /// The broker was unavailable (no attempt spent).
    Unavailable,
    /// Rejected or permanent.
    Failed,
}

/// One publish call: when it started and ended, and how.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt {
    pub(crate) started: Instant,
    pub(crate) ended: Instant,
    pub(crate) outcome: Outcome,
}

/// The publish calls a [`WatchedPublisher`] saw. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Attempts(Arc<Mutex<Vec<Attempt>>>);

impl Attempts {
    /// The calls that started at or after `since`.
    pub(crate) fn since(&self, since: Instant) -> Vec<Attempt> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|attempt| attempt.started >= since)
            .copied()
            .collect()
    }

    fn push(&self, started: Instant, outcome: Outcome) {
        let attempt = Attempt {
            started,
            ended: Instant::now(),
            outcome,
        };
        let mut attempts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Only the calls around the outages matter: keep memory flat.
        if attempts.len() > 200_000 {
            attempts.drain(..100_000);
        }
        attempts.push(attempt);
    }
}

/// Publishes with `P` and logs every call into [`Attempts`].
#[derive(Debug)]
pub(crate) struct WatchedPublisher<P> {
    inner: P,
    attempts: Attempts,
}

impl<P> WatchedPublisher<P> {
    /// Logs into `attempts`.
    pub(crate) fn new(inner: P, attempts: Attempts) -> Self {
        Self { inner, attempts }
    }
}

fn outcome<'a>(mut results: impl Iterator<Item = &'a Result<PublishAck, PublishError>>) -> Outcome {
    let mut first_error = None;
    for result in results.by_ref() {
        match result {
            Ok(_) => return Outcome::Acked,
            Err(err) if first_error.is_none() => first_error = Some(err.kind()),
            Err(_) => {}
        }
    }
    match first_error {
        Some(PublishErrorKind::Unavailable) => Outcome::Unavailable,
        _ => Outcome::Failed,
    }
}

impl<P: Publisher> Publisher for WatchedPublisher<P> {
    async fn publish(&self, message: &OutboxMessage) -> Result<PublishAck, PublishError> {
        let started = Instant::now();
        let result = self.inner.publish(message).await;
        self.attempts
            .push(started, outcome(std::iter::once(&result)));
        result
    }

    async fn publish_run(&self, run: &[&OutboxMessage]) -> Vec<Result<PublishAck, PublishError>> {
        let started = Instant::now();
        let results = self.inner.publish_run(run).await;
        self.attempts.push(started, outcome(results.iter()));
        results
    }

    fn is_available(&self) -> bool {
        self.inner.is_available()
    }

    fn ack_timeout(&self) -> Option<Duration> {
        self.inner.ack_timeout()
    }
}

/// The client's connection state over time: each change, as sampled.
#[derive(Debug, Clone, Default)]
pub(crate) struct Connection(Arc<Mutex<Vec<(Instant, bool)>>>);

impl Connection {
    /// Samples `client`'s state every 5 ms until the task is aborted.
    pub(crate) fn watch(client: Client) -> (Self, tokio::task::JoinHandle<()>) {
        let connection = Self::default();
        let changes = connection.clone();
        let task = tokio::spawn(async move {
            let mut last = None;
            let mut ticks = tokio::time::interval(STATE_SAMPLE);
            loop {
                ticks.tick().await;
                let connected = client.connection_state() == State::Connected;
                if last != Some(connected) {
                    last = Some(connected);
                    changes
                        .0
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((Instant::now(), connected));
                }
            }
        });
        (connection, task)
    }

    /// The first time the client was seen connected after being seen
    /// disconnected, both at or after `since`.
    pub(crate) fn reconnected_after(&self, since: Instant) -> Option<Instant> {
        let changes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut lost = false;
        for &(at, connected) in changes.iter().filter(|(at, _)| *at >= since) {
            if !connected {
                lost = true;
            } else if lost {
                return Some(at);
            }
        }
        None
    }
}
