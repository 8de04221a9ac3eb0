//! A running subscriber's [`SubscriberProbe`]: whether it can consume, and
//! how far behind it is, for a service's readiness endpoint.
//!
//! What it reads costs nothing but one request per JetStream consumer: the
//! task's state, the client's connection state, the messages the
//! subscriber holds and the aggregates it holds back are in memory; the
//! consumer's lag (`num_pending`, `num_ack_pending`) is the server's
//! consumer info.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::context::ConsumerInfoErrorKind;

use crate::subscriber::setup::SetupState;
use crate::subscriber::setup::Shared;

/// A [`RunningSubscriber`](crate::subscriber::RunningSubscriber)'s health, from
/// [`RunningSubscriber::health`](crate::subscriber::RunningSubscriber::health); cheap to
/// clone, shared with the running subscriber.
///
/// A subscriber is **ready** while its task runs, its client is connected
/// to NATS and every JetStream consumer it reads (the durable, or one per
/// owned partition) is present on the server. The lag (messages not yet
/// delivered to it), the messages delivered and not acknowledged, and the
/// aggregates held behind a dead message (with
/// [`keep_order`](crate::subscriber::SubscriberBuilder::keep_order)) are reported
/// beside it; they do not make it unready, since an unready subscriber
/// would not catch up faster.
///
/// ```no_run
/// # async fn run(running: txoutbox_nats::RunningSubscriber) {
/// use std::time::Duration;
///
/// let probe = running.health();
/// let health = probe.check(Duration::from_millis(500)).await;
/// let status = if health.ready { 200 } else { 503 };
/// tracing::info!(status, lag = ?health.pending, held = ?health.held_aggregates, "subscriber");
/// # }
/// ```
#[derive(Clone)]
pub struct SubscriberProbe {
    shared: Arc<Shared>,
    consumers: Arc<[String]>,
    running: Arc<AtomicBool>,
}

impl std::fmt::Debug for SubscriberProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriberProbe")
            .field("durable", &self.shared.consumer)
            .field("consumers", &self.consumers)
            .field("running", &self.is_running())
            .finish_non_exhaustive()
    }
}

/// What a [`SubscriberProbe::check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubscriberHealth {
    /// The durable consumer's name (with partitions, the base name).
    pub durable: String,
    /// The stream it reads.
    pub stream: String,
    /// Running, connected, every consumer present: no problem.
    pub ready: bool,
    /// The subscriber's task is running.
    pub running: bool,
    /// The client is connected to a NATS server.
    pub connected: bool,
    /// Built while the broker was away, it has not set up its consumers
    /// yet: its client is connecting (never connected since the start), or
    /// the server has not answered yet. Not ready meanwhile; the
    /// subscriber sets them up, and reads, once the broker answers.
    pub connecting: bool,
    /// The JetStream consumers it reads, as the server sees them.
    pub consumers: Vec<ConsumerLag>,
    /// The lag: messages of the stream (under the filter subject) not yet
    /// delivered to the subscriber, summed over its consumers; `None` when
    /// the server could not say for any of them.
    pub pending: Option<u64>,
    /// Messages delivered and not yet acknowledged, summed over its
    /// consumers; `None` as for `pending`.
    pub ack_pending: Option<u64>,
    /// Messages this process holds: received and not yet settled.
    pub in_flight: usize,
    /// Aggregates held behind a message that could not be applied, waiting
    /// for an operator's release; `None` without
    /// [`keep_order`](crate::subscriber::SubscriberBuilder::keep_order).
    pub held_aggregates: Option<usize>,
    /// With [`failover`](crate::subscriber::SubscriberBuilder::failover): whether this
    /// process is the pinned one (receiving) rather than a standby, as the
    /// server says; `None` without failover or without the server's answer.
    pub pinned: Option<bool>,
    /// Why the subscriber is paused, while it is: its inbox's database is
    /// away, so it starts no handler, keeps what it holds and spends no
    /// delivery until the database answers (see
    /// [database outages](crate::subscriber#database-outages)). A paused subscriber is
    /// still ready: taking it out of a load balancer would not bring its
    /// database back.
    pub paused: Option<String>,
    /// With the reader lease (a subscriber that keeps order, see
    /// [`reader_lease`](crate::subscriber::SubscriberBuilder::reader_lease)): whether
    /// this process holds it and reads (`true`) or stands by (`false`,
    /// also while a lease it holds ran out because the database is away);
    /// `None` without a lease. A standby is ready.
    pub lease_held: Option<bool>,
    /// Why it is not ready, one line each.
    pub problems: Vec<String>,
}

/// One JetStream consumer of a subscriber, as the server reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerLag {
    /// The consumer's name: the durable, or `<durable>-p<k>`.
    pub name: String,
    /// Whether the server has it: `Some(false)` when it answered that the
    /// consumer (or its stream) does not exist; `None` when there was no
    /// answer (see `error`).
    pub present: Option<bool>,
    /// Messages not yet delivered (`num_pending`).
    pub pending: Option<u64>,
    /// Messages delivered and not acknowledged (`num_ack_pending`).
    pub ack_pending: Option<u64>,
    /// With failover: whether the consumer's pin is this process's.
    pub pinned: Option<bool>,
    /// Why the server's answer is missing, if it is.
    pub error: Option<String>,
}

impl SubscriberProbe {
    /// The probe of the subscriber that `shared` describes, reading
    /// `consumers`; not running until [`watch`](Self::watch)ed.
    pub(crate) fn new(shared: Arc<Shared>, consumers: Vec<String>) -> Self {
        Self {
            shared,
            consumers: consumers.into(),
            running: Arc::default(),
        }
    }

    /// `task`, marking the subscriber running from now until it ends,
    /// however it ends.
    pub(crate) fn watch<F: Future>(&self, task: F) -> impl Future<Output = F::Output> + use<F> {
        struct Running(Arc<AtomicBool>);
        impl Drop for Running {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        self.running.store(true, Ordering::Release);
        let running = Running(Arc::clone(&self.running));
        async move {
            let _running = running;
            task.await
        }
    }

    /// The durable consumer's name (with partitions, the base name).
    pub fn durable(&self) -> &str {
        &self.shared.consumer
    }

    /// The stream it reads.
    pub fn stream(&self) -> &str {
        &self.shared.stream
    }

    /// Whether the subscriber's task runs (no I/O).
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Whether its client is connected to a NATS server (no I/O).
    pub fn is_connected(&self) -> bool {
        self.shared.client.connection_state() == State::Connected
    }

    /// Its client's connection to NATS (no I/O): `Pending` before the
    /// first connection succeeded (a client that retries its initial
    /// connection), `Connected`, or `Disconnected` while it reconnects.
    pub fn connection_state(&self) -> State {
        self.shared.client.connection_state()
    }

    /// Asks its inbox's database whether it answers and takes writes
    /// ([`ConsumerInbox::probe`](txoutbox_core::consumer::ConsumerInbox::probe));
    /// `None` for a subscriber whose handlers apply through no inbox.
    pub fn probe_inbox(&self) -> Option<txoutbox_core::consumer::HeldFuture<()>> {
        self.shared.inbox.as_ref().map(|inbox| inbox.probe())
    }

    /// Messages this process holds, received and not yet settled (no I/O).
    pub fn in_flight(&self) -> usize {
        self.shared.held.load(Ordering::Relaxed)
    }

    /// Aggregates held behind a dead message, as of the last read of the
    /// store (every second); `None` without
    /// [`keep_order`](crate::subscriber::SubscriberBuilder::keep_order) (no I/O).
    pub fn held_aggregates(&self) -> Option<usize> {
        self.shared.holds.as_ref().map(|holds| holds.count())
    }

    /// With the reader lease: whether this process holds it (no I/O; see
    /// [`SubscriberHealth::lease_held`]).
    pub fn lease_held(&self) -> Option<bool> {
        self.shared
            .gate
            .is_leased()
            .then(|| self.is_running() && self.shared.gate.holds())
    }

    /// Checks the subscriber: the in-memory state, and each consumer's info
    /// from the server, asked at once and waited for at most `timeout`
    /// (keep it under the orchestrator's probe timeout). While the client
    /// is disconnected the server is not asked.
    pub async fn check(&self, timeout: Duration) -> SubscriberHealth {
        let running = self.is_running();
        let connected = self.is_connected();
        let setup = self.shared.setup.get();
        let connecting = matches!(setup, SetupState::Waiting(_));
        let consumers: Vec<ConsumerLag> = if connected && setup == SetupState::Done {
            futures::future::join_all(
                self.consumers
                    .iter()
                    .map(|name| self.consumer_lag(name, timeout)),
            )
            .await
        } else {
            let why = if connected {
                "not set up yet"
            } else {
                "not connected to NATS"
            };
            self.consumers
                .iter()
                .map(|name| ConsumerLag::unknown(name, why))
                .collect()
        };
        let mut problems = Vec::new();
        if !running {
            problems.push(format!("subscriber {} has stopped", self.durable()));
        }
        match &setup {
            SetupState::Waiting(why) => {
                problems.push(format!(
                    "subscriber {} is connecting: {why}",
                    self.durable()
                ));
            }
            SetupState::Failed(why) => problems.push(format!(
                "subscriber {} could not set up its consumers: {why}",
                self.durable()
            )),
            SetupState::Done if !connected => problems.push(format!(
                "subscriber {} is not connected to NATS",
                self.durable()
            )),
            SetupState::Done => {}
        }
        for consumer in &consumers {
            match (consumer.present, &consumer.error) {
                (Some(false), _) => problems.push(format!(
                    "consumer {} is missing on stream {}",
                    consumer.name,
                    self.stream()
                )),
                (None, Some(error)) if connected => problems.push(format!(
                    "consumer {}: no answer from the server: {error}",
                    consumer.name
                )),
                _ => {}
            }
        }
        let sum = |field: fn(&ConsumerLag) -> Option<u64>| {
            consumers
                .iter()
                .filter_map(field)
                .fold(None, |total: Option<u64>, n| Some(total.unwrap_or(0) + n))
        };
        let pinned = consumers.iter().find_map(|consumer| consumer.pinned);
        SubscriberHealth {
            durable: self.durable().to_owned(),
            stream: self.stream().to_owned(),
            ready: problems.is_empty(),
            running,
            connected,
            connecting,
            pending: sum(|c| c.pending),
            ack_pending: sum(|c| c.ack_pending),
            consumers,
            in_flight: self.in_flight(),
            held_aggregates: self.held_aggregates(),
            pinned,
            paused: self
                .shared
                .pause
                .paused()
                .map(|(since, reason)| format!("paused for {} s: {reason}", since.as_secs())),
            lease_held: self.lease_held(),
            problems,
        }
    }

    async fn consumer_lag(&self, name: &str, timeout: Duration) -> ConsumerLag {
        let ask = async {
            let stream = self
                .shared
                .context
                .get_stream_no_info(&*self.shared.stream)
                .await
                .map_err(|err| Answer::Failed(txoutbox_core::ErrorChain(&err).to_string()))?;
            stream
                .consumer_info(name)
                .await
                .map_err(|err| match err.kind() {
                    ConsumerInfoErrorKind::NotFound | ConsumerInfoErrorKind::StreamNotFound => {
                        Answer::Absent
                    }
                    _ => Answer::Failed(txoutbox_core::ErrorChain(&err).to_string()),
                })
        };
        let answer = tokio::time::timeout(timeout, ask)
            .await
            .unwrap_or_else(|_| {
                Err(Answer::Failed(format!(
                    "no consumer info within {} ms",
                    timeout.as_millis()
                )))
            });
        let mut lag = ConsumerLag {
            name: name.to_owned(),
            present: None,
            pending: None,
            ack_pending: None,
            pinned: None,
            error: None,
        };
        match answer {
            Ok(info) => {
                lag.present = Some(true);
                lag.pending = Some(info.num_pending);
                lag.ack_pending = Some(info.num_ack_pending as u64);
                if self.shared.failover.is_some() {
                    let ours = self.shared.pin().current().map(str::to_owned);
                    lag.pinned = Some(ours.is_some_and(|ours| {
                        info.priority_groups
                            .iter()
                            .any(|group| group.pinned_client_id.as_deref() == Some(ours.as_str()))
                    }));
                }
            }
            Err(Answer::Absent) => lag.present = Some(false),
            Err(Answer::Failed(error)) => lag.error = Some(error),
        }
        lag
    }
}

/// Why a consumer's info is missing.
enum Answer {
    /// The server says the consumer (or its stream) does not exist.
    Absent,
    /// No answer: the request failed or timed out.
    Failed(String),
}

impl ConsumerLag {
    fn unknown(name: &str, error: impl Into<String>) -> Self {
        Self {
            name: name.to_owned(),
            present: None,
            pending: None,
            ack_pending: None,
            pinned: None,
            error: Some(error.into()),
        }
    }
}
