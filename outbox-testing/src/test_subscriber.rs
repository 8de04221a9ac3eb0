//! [`TestSubscriber`]: a service's real subscriber, the very
//! `SubscriberBuilder` its code builds, driven in this process without a
//! nats-server.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use txoutbox_core::consumer::{BoxError, ParkedMessage, Unpark};
use txoutbox_core::{MessageId, OutboxMessage, wire};
use txoutbox_nats::async_nats::{self, jetstream};
use txoutbox_nats::subscriber::__in_process::{
    Acked, InProcess, InProcessMessage, InProcessOutcome,
};
use txoutbox_nats::subscriber::{DeadLetterKind, SubscriberBuildError, SubscriberBuilder};

/// The `ce-source` the test stream's messages carry.
const SOURCE: &str = "/txoutbox-testing";

/// A service's subscriber run in this process: the `SubscriberBuilder` the
/// service's own code builds (same handlers, same inbox, same settings),
/// checked as `build` checks it, fed the messages the outbox published as
/// they would arrive from the stream (with stream sequences and delivery
/// counts). Each delivery goes through the subscriber's own code: the
/// envelope rebuilt from the headers, the event decoded into the handler's
/// type through the registry (upcasts included), the handler run (through
/// the inbox, exactly once), a retryable failure retried up to
/// `max_deliver` and then dead-lettered `exhausted`, a permanent one
/// dead-lettered `rejected`; with an inbox, a dead message holds its
/// aggregate (parked in the inbox's real tables), later messages of the
/// aggregate are parked behind it, and after
/// [`Inbox::release`](https://docs.rs/txoutbox-sea-orm/latest/txoutbox_sea_orm/inbox/struct.Inbox.html#method.release)
/// [`apply_releases`](Self::apply_releases) applies them in order. Dead
/// letters are recorded in memory ([`dead_letters`](Self::dead_letters)).
/// No nats-server: [`TestSubscriber::jetstream`] gives the builder a
/// context that never connects, and nothing is sent through it.
///
/// Feature `nats` (the facade's `testing` with `nats`).
///
/// What it leaves out is JetStream's own part: fetching, acks and naks on
/// the wire, progress acks, the backoff delays (reported, not waited:
/// a retried message is delivered again at once), concurrent lanes (one
/// message at a time, in the order given, so each aggregate's messages
/// run in stream order and a retried message is settled before what
/// follows it), and the restart guard. Those are tested against real
/// nats-servers in the repository's own suite.
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// # use txoutbox_core::IntegrationEvent;
/// # #[derive(Debug, Clone, Serialize, Deserialize, IntegrationEvent)]
/// # #[event(name = "doc.test_subscriber.invoice.sent")]
/// # struct InvoiceSent { cents: u64 }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use txoutbox_core::{Delivery, HandlerError, MessageContext, OutboxMessage, PendingMessage, SubjectPrefix};
/// use txoutbox_nats::subscriber::SubscriberBuilder;
/// use txoutbox_nats::{IntoJetStream, Subscriber};
/// use txoutbox_testing::{DeliveryOutcome, TestSubscriber};
///
/// // The service's code: its subscriber, built from whatever NATS it is given.
/// fn billing(nats: impl IntoJetStream, total: Arc<AtomicU64>) -> SubscriberBuilder {
///     Subscriber::builder(nats, "billing")
///         .stream("EVENTS")
///         .unordered() // no inbox here: see the guide for one with an inbox
///         .on(move |sent: InvoiceSent, _: Delivery| {
///             let total = Arc::clone(&total);
///             async move {
///                 total.fetch_add(sent.cents, Ordering::Relaxed);
///                 Ok::<_, HandlerError>(())
///             }
///         })
/// }
///
/// // The test: the same builder, run in process.
/// let total = Arc::new(AtomicU64::new(0));
/// let billing = TestSubscriber::new(billing(TestSubscriber::jetstream().await?, total.clone())).await?;
/// let sent = OutboxMessage::standalone(
///     PendingMessage::new(&InvoiceSent { cents: 250 })?,
///     &MessageContext::new(),
///     &SubjectPrefix::default(),
/// );
/// let settled = billing.deliver(&sent).await?;
/// assert_eq!(settled[0].outcome, DeliveryOutcome::Handled);
/// assert_eq!(total.load(Ordering::Relaxed), 250);
/// # Ok(()) }
/// ```
pub struct TestSubscriber {
    subscriber: InProcess,
    stream: Mutex<Stream>,
}

impl std::fmt::Debug for TestSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestSubscriber")
            .field("durable", &self.subscriber.durable())
            .field("stream", &self.subscriber.stream())
            .finish_non_exhaustive()
    }
}

/// What the test stream holds: each message's stream sequence and
/// deliveries so far, and the dead letters.
#[derive(Default)]
struct Stream {
    seen: HashMap<MessageId, Position>,
    last_sequence: u64,
    dead_letters: Vec<RecordedDeadLetter>,
}

#[derive(Clone, Copy)]
struct Position {
    stream_sequence: u64,
    deliveries: u64,
}

/// One delivery of a message (or one parked message taken up again after a
/// release) and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settled {
    /// The message id.
    pub message_id: MessageId,
    /// Its event name.
    pub event_name: String,
    /// Its aggregate.
    pub aggregate_type: String,
    /// Its aggregate.
    pub aggregate_id: String,
    /// Its position in the test stream (from 1, in the order messages were
    /// first delivered).
    pub stream_sequence: u64,
    /// Which delivery this was (1 the first; a parked message applied after
    /// a release counts as 1, as the subscriber gives it).
    pub delivery: u64,
    /// What became of it.
    pub outcome: DeliveryOutcome,
}

/// What the subscriber did with one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeliveryOutcome {
    /// Its handler returned `Ok`: acked.
    Handled,
    /// Its handler's inbox had applied it before (a redelivery): acked, the
    /// effects not run again.
    Duplicate,
    /// No handler takes its event: acked and counted
    /// (`outcome="ignored"`).
    Ignored,
    /// Its aggregate is held behind a dead message: parked behind it in the
    /// inbox and acked.
    Held,
    /// Its handler failed with a retryable error (or panicked): nakked, to
    /// be delivered again after `delay` (the harness does not wait).
    Retried {
        /// The backoff delay the nak carries.
        delay: Duration,
        /// The handler's error.
        reason: String,
    },
    /// It can never be handled here: see [`TestSubscriber::dead_letters`].
    DeadLettered {
        /// Why: `rejected` (a permanent error), `exhausted` (failed on
        /// `max_deliver`), `malformed`, ...
        kind: DeadLetterKind,
        /// Why, in words.
        reason: String,
        /// Whether its aggregate is now held behind it (the subscriber
        /// keeps order with an inbox).
        holds_aggregate: bool,
    },
    /// Parked behind a hold the operator released with `Release::Skip`:
    /// recorded as processed, never applied.
    Skipped,
    /// Applied after a release and failed again: its aggregate is held
    /// behind it, for `reason`.
    HeldAgain {
        /// Why it failed this time.
        reason: String,
    },
    /// Not the message's fault: its inbox's database was away (or other
    /// transactions were in the way). Not settled and no delivery spent:
    /// the running subscriber pauses and applies it again once the
    /// database answers (deliver it again to do the same).
    Interrupted {
        /// The database's error.
        reason: String,
    },
}

impl DeliveryOutcome {
    /// Its name: `handled`, `duplicate`, `ignored`, `held`, `retried`,
    /// `dead_lettered`, `skipped`, `held_again` or `interrupted`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Handled => "handled",
            Self::Duplicate => "duplicate",
            Self::Ignored => "ignored",
            Self::Held => "held",
            Self::Retried { .. } => "retried",
            Self::DeadLettered { .. } => "dead_lettered",
            Self::Skipped => "skipped",
            Self::HeldAgain { .. } => "held_again",
            Self::Interrupted { .. } => "interrupted",
        }
    }
}

/// A message the subscriber gave up on, as its dead letter says.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecordedDeadLetter {
    /// The message.
    pub message: OutboxMessage,
    /// Why (`Outbox-Dead-Kind`).
    pub kind: DeadLetterKind,
    /// Why, in words (`Outbox-Dead-Reason`).
    pub reason: String,
    /// Where the copy went (`dlq.<durable>` by default); `None` with
    /// `DeadLetterPolicy::terminate`.
    pub subject: Option<String>,
    /// Its stream sequence.
    pub stream_sequence: u64,
    /// How many times it was delivered.
    pub deliveries: u64,
}

/// The subscriber could not be set up or driven.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestSubscriberError {
    /// The builder's settings, handlers or inbox would fail `build` too.
    #[error(transparent)]
    Build(#[from] SubscriberBuildError),
    /// The offline NATS client could not be made.
    #[error("the offline NATS client")]
    Client(#[source] async_nats::ConnectError),
    /// The inbox could not be read (the held aggregates, what it applied).
    #[error("the inbox of consumer `{consumer}` could not be read")]
    Inbox {
        /// The consumer.
        consumer: String,
        /// What the inbox said.
        #[source]
        source: BoxError,
    },
    /// The message could not be published: a value NATS would not carry as
    /// it is (`txoutbox_core::wire::check`).
    #[error("message {id} cannot be published")]
    Unpublishable {
        /// The message.
        id: MessageId,
        /// What is wrong with it.
        #[source]
        source: wire::WireError,
    },
}

impl TestSubscriber {
    /// A JetStream context for the service's subscriber builder that needs
    /// no server: its client never connects (its first dial is a year
    /// away, to an address that does not resolve) and the harness sends
    /// nothing through it.
    pub async fn jetstream() -> Result<jetstream::Context, TestSubscriberError> {
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .reconnect_delay_callback(|_| OFFLINE_DIAL_DELAY)
            .connect("nats://in-process.invalid:4222")
            .await
            .map_err(TestSubscriberError::Client)?;
        Ok(jetstream::new(client))
    }

    /// Runs `builder` in this process: checked as
    /// [`build`](SubscriberBuilder::build) checks it (settings, handlers, an
    /// inbox or `unordered`, the inbox's tables, the registry), without its
    /// JetStream part (the stream, the durable consumer, the dead-letter
    /// stream are neither created nor verified). Reads the held aggregates
    /// as a starting subscriber does.
    pub async fn new(builder: SubscriberBuilder) -> Result<Self, TestSubscriberError> {
        let subscriber = builder.into_in_process().await?;
        subscriber
            .refresh_holds()
            .await
            .map_err(|source| TestSubscriberError::Inbox {
                consumer: subscriber.durable().to_owned(),
                source,
            })?;
        tracing::debug!(consumer = subscriber.durable(), "test subscriber ready");
        Ok(Self {
            subscriber,
            stream: Mutex::default(),
        })
    }

    /// The durable consumer's name (the inbox's consumer).
    pub fn durable(&self) -> &str {
        self.subscriber.durable()
    }

    /// Delivers `message` until it is settled: delivered again at once
    /// while its handler fails with a retryable error, up to `max_deliver`
    /// deliveries (the last failure is dead-lettered `exhausted`). Returns
    /// each delivery. A message delivered before (same id) comes back as a
    /// redelivery: its stream sequence, its next delivery count.
    pub async fn deliver(
        &self,
        message: &OutboxMessage,
    ) -> Result<Vec<Settled>, TestSubscriberError> {
        let mut settled = Vec::new();
        loop {
            let once = self.deliver_once(message).await?;
            let again = matches!(once.outcome, DeliveryOutcome::Retried { .. })
                && once.delivery < self.subscriber.max_deliver();
            settled.push(once);
            if !again {
                return Ok(settled);
            }
        }
    }

    /// [`deliver`](Self::deliver) for each of `messages`, in order (the
    /// outbox's published messages, e.g. what `SqliteOutbox::drain`
    /// returned): every delivery of each.
    pub async fn deliver_all<'a>(
        &self,
        messages: impl IntoIterator<Item = &'a OutboxMessage>,
    ) -> Result<Vec<Settled>, TestSubscriberError> {
        let mut settled = Vec::new();
        for message in messages {
            settled.extend(self.deliver(message).await?);
        }
        Ok(settled)
    }

    /// Delivers `message` once: the first delivery, or, for a message
    /// delivered before, a redelivery (as after a lost ack or a crash).
    pub async fn deliver_once(
        &self,
        message: &OutboxMessage,
    ) -> Result<Settled, TestSubscriberError> {
        let position = self.next_delivery(message.id);
        let applied_before = self.applied_before(message.id).await?;
        let headers =
            wire::encode(message, SOURCE).map_err(|source| TestSubscriberError::Unpublishable {
                id: message.id,
                source,
            })?;
        let pairs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (name.as_ref(), value.as_str()))
            .collect();
        let outcome = self
            .subscriber
            .deliver(InProcessMessage {
                subject: &message.subject,
                headers: &pairs,
                payload: message.payload.as_bytes(),
                stream_sequence: position.stream_sequence,
                deliveries: position.deliveries,
            })
            .await;
        let outcome = match outcome {
            InProcessOutcome::Acked(Acked::Handled) if applied_before => DeliveryOutcome::Duplicate,
            InProcessOutcome::Acked(Acked::Handled) => DeliveryOutcome::Handled,
            InProcessOutcome::Acked(Acked::Ignored) => DeliveryOutcome::Ignored,
            InProcessOutcome::Acked(Acked::Held) => DeliveryOutcome::Held,
            InProcessOutcome::Retried { delay, reason } => {
                DeliveryOutcome::Retried { delay, reason }
            }
            InProcessOutcome::Interrupted { reason } => DeliveryOutcome::Interrupted { reason },
            InProcessOutcome::Dead {
                kind,
                reason,
                held,
                subject,
            } => {
                self.stream().dead_letters.push(RecordedDeadLetter {
                    message: message.clone(),
                    kind,
                    reason: reason.clone(),
                    subject,
                    stream_sequence: position.stream_sequence,
                    deliveries: position.deliveries,
                });
                DeliveryOutcome::DeadLettered {
                    kind,
                    reason,
                    holds_aggregate: held,
                }
            }
        };
        Ok(Settled {
            message_id: message.id,
            event_name: message.event_name.clone(),
            aggregate_type: message.aggregate_type.clone(),
            aggregate_id: message.aggregate_id.clone(),
            stream_sequence: position.stream_sequence,
            delivery: position.deliveries,
            outcome,
        })
    }

    /// What the running subscriber does within a second of an operator's
    /// `Inbox::release`: reads the holds and applies what is parked behind
    /// each released one, in stream order, through the same handlers
    /// (`Release::Retry` applies the message it was held behind again,
    /// `Release::Skip` leaves it unapplied); should one fail, its aggregate
    /// is held behind it again. Returns each parked message settled.
    pub async fn apply_releases(&self) -> Result<Vec<Settled>, TestSubscriberError> {
        let replayed = self.subscriber.apply_releases().await.map_err(|source| {
            TestSubscriberError::Inbox {
                consumer: self.durable().to_owned(),
                source,
            }
        })?;
        Ok(replayed.into_iter().map(released).collect())
    }

    /// The messages it gave up on, in order.
    pub fn dead_letters(&self) -> Vec<RecordedDeadLetter> {
        self.stream().dead_letters.clone()
    }

    /// The stream position of `id`'s next delivery.
    fn next_delivery(&self, id: MessageId) -> Position {
        let mut stream = self.stream();
        let next_sequence = stream.last_sequence + 1;
        let position = stream.seen.entry(id).or_insert(Position {
            stream_sequence: next_sequence,
            deliveries: 0,
        });
        position.deliveries += 1;
        let position = *position;
        stream.last_sequence = stream.last_sequence.max(position.stream_sequence);
        position
    }

    /// Whether the subscriber's inbox applied `id` already.
    async fn applied_before(&self, id: MessageId) -> Result<bool, TestSubscriberError> {
        let Some(inbox) = self.subscriber.inbox() else {
            return Ok(false);
        };
        let applied =
            inbox
                .applied(vec![id])
                .await
                .map_err(|source| TestSubscriberError::Inbox {
                    consumer: self.durable().to_owned(),
                    source,
                })?;
        Ok(applied.contains(&id))
    }

    fn stream(&self) -> MutexGuard<'_, Stream> {
        self.stream.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How long the offline client waits before each dial: never, in a test.
const OFFLINE_DIAL_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);

fn released((message, outcome): (ParkedMessage, Unpark)) -> Settled {
    let outcome = match outcome {
        Unpark::Applied => DeliveryOutcome::Handled,
        Unpark::Skipped => DeliveryOutcome::Skipped,
        Unpark::HeldAgain { reason } => DeliveryOutcome::HeldAgain { reason },
    };
    tracing::debug!(message_id = %message.message_id, outcome = outcome.name(), "parked message settled after a release");
    Settled {
        event_name: message.event_name().to_owned(),
        message_id: message.message_id,
        aggregate_type: message.aggregate_type,
        aggregate_id: message.aggregate_id,
        stream_sequence: message.stream_sequence,
        delivery: 1,
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_offline_client_never_connects() {
        let context = TestSubscriber::jetstream().await.expect("offline client");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            context.client().connection_state(),
            async_nats::connection::State::Pending
        );
    }
}
