//! Typed subscribers: consume what the outbox publishes with handlers of
//! Rust event types, over a durable JetStream pull consumer.
//!
//! ```no_run
//! # use txoutbox_core::IntegrationEvent;
//! # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
//! # #[event(name = "order.placed", version = 2)] struct OrderPlaced { order_id: String }
//! # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
//! # #[event(name = "order.paid")] struct OrderPaid { order_id: String }
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use txoutbox_core::{Delivery, HandlerError};
//! use txoutbox_nats::subscriber::Subscriber;
//!
//! let client = async_nats::connect("nats://127.0.0.1:4222").await?;
//! let subscriber = Subscriber::builder(async_nats::jetstream::new(client), "orders-projection")
//!     .stream("EVENTS")
//!     .filter_subject("events.order.>")
//!     .max_in_flight(64)
//!     .max_deliver(5)
//!     .ack_wait(Duration::from_secs(30))
//!     .on(|event: OrderPlaced, delivery: Delivery| async move {
//!         tracing::info!(order = %event.order_id, seq = delivery.sequence(), "placed");
//!         Ok(())
//!     })
//!     .on(|event: OrderPaid, _: Delivery| async move {
//!         if event.order_id.is_empty() {
//!             return Err(HandlerError::permanent("an order without an id"));
//!         }
//!         Ok(())
//!     })
//!     .unordered()              // plain handlers, no inbox: effects at least once
//!     .build()                  // creates or verifies the durable consumer
//!     .await?;
//! let running = subscriber.spawn();
//! // ... serve ...
//! running.shutdown().await?;    // stop fetching, finish handlers, nak the rest
//! # Ok(()) }
//! ```
//!
//! # Dispatch
//!
//! Each message's envelope is rebuilt from its headers with
//! [`txoutbox_core::wire::decode`]; the event name picks the handler, and the
//! [`EventRegistry`](txoutbox_core::EventRegistry) decodes the payload into the
//! handler's type, applying the declared upcasts, so a handler of the newest
//! version receives older versions too. The handler also gets a
//! [`Delivery`](txoutbox_core::Delivery): message id, aggregate type and id,
//! sequence, correlation and causation ids, headers, delivery count, stream
//! sequence.
//!
//! # Outcomes
//!
//! | the handler / the message | the subscriber |
//! |---|---|
//! | `Ok(())` | acks |
//! | retryable error (or a panic) | naks with the [`Backoff`] delay for its delivery count |
//! | retryable error on delivery `max_deliver` | dead-letters it, with the last error (kind `exhausted`) |
//! | [permanent](txoutbox_core::HandlerError::permanent) error | dead-letters it (kind `rejected`) |
//! | no handler takes its event (registered or not) | acks it, counted `ignored` (dead-letters it with [`dead_letter_unhandled`](SubscriberBuilder::dead_letter_unhandled)) |
//! | invalid envelope, payload that does not fit the handler's type | dead-letters it, with the reason |
//! | the inbox's database is away, or a [`HandlerError::unavailable`](txoutbox_core::HandlerError::unavailable) | neither: keeps it and pauses (see [database outages](#database-outages)); no delivery spent |
//! | a deadlock or serialization failure in the inbox's transaction | neither: applies it again at once; no delivery spent |
//!
//! "Dead-letters" follows the [`DeadLetterPolicy`]: by default a copy with
//! the reason is published to `dlq.<durable>` and the original terminated
//! (see [`dead_lettering`]); a copy that cannot be published is nakked instead,
//! never lost. Nothing a message contains can stop the subscriber.
//!
//! # Database outages
//!
//! An outage is not a handler failure. When an attempt at a message fails
//! because its inbox's database cannot be reached, begun, written or
//! committed to — the connection refused or lost, the pool without a
//! connection in time, the server shutting down or starting, a read-only
//! replica after a failover — or because the handler said so with
//! [`HandlerError::unavailable`](txoutbox_core::HandlerError::unavailable),
//! the message is not settled and spends none of its deliveries: it goes
//! back to its aggregate's lane, and the subscriber **pauses**. While
//! paused it starts no handler and no inbox group, keeps every message it
//! holds alive with progress acks, and probes the database every quarter
//! second at first, every 2 s at most, each probe bounded by its own
//! timeout (not the pool's acquire timeout). At the first answer it
//! resumes and applies what it held, each aggregate in its order. A
//! message whose aggregate must be held behind it (a dead message, with
//! [`keep_order`](SubscriberBuilder::keep_order)) is never dead-lettered
//! without its hold: while the hold cannot be recorded, it waits the same
//! way. Which errors are the database's is the inbox's call
//! ([`ConsumerInbox::cause_of`](txoutbox_core::consumer::ConsumerInbox::cause_of),
//! the table in `txoutbox_sea_orm::OutboxError::is_unavailable`); a deadlock
//! or serialization failure is run again at once, after a short jittered
//! pause, and spends no delivery either. The pause shows as
//! [`SubscriberHealth::paused`] and the `outbox_consumer_paused` gauge; it
//! does not make the subscriber unready.
//!
//! Under the [reader lease](SubscriberBuilder::reader_lease) an outage
//! also stops its renewals: once the lease ran out by this process's
//! reckoning (nine tenths of it after the last renewal was sent), the
//! subscriber pulls nothing either, and hands back what the client
//! buffered. When the database answers, the holder renews the lease (the
//! standbys could not take it meanwhile: they could not reach the database
//! either) and goes on where it was; should another process have taken
//! it, this one hands back what it holds and stands by.
//!
//! # Order and concurrency
//!
//! The subscriber reads every message the server sends as soon as it
//! arrives and puts it in its aggregate's *lane* (the aggregate is the
//! `ce-aggregatetype` and `ce-subject` headers). Each lane handles its
//! messages one at a time, in stream order; different aggregates run in
//! parallel, up to `max_in_flight` handlers at once. A message waiting for
//! a handler slot or behind an earlier message of its aggregate takes no
//! slot; it and the running ones are kept alive with progress acks
//! (`+WPI`, every third of `ack_wait`), so none reaches its ack wait while
//! it waits.
//!
//! Everything the subscriber holds is bounded by the consumer's
//! [`max_ack_pending`](SubscriberBuilder::max_ack_pending), which the
//! builder sets (by default the larger of 1,000 and 4 × `max_in_flight`)
//! and verifies: JetStream delivers nothing new while that many messages
//! are unacknowledged.
//!
//! When a handler fails, its message is nakked with its backoff delay and
//! is *away*. The later messages of its aggregate — those already received
//! and those that arrive meanwhile — wait in memory until it is back and
//! handled. They are not nakked, so waiting spends none of their
//! deliveries: each message gets `max_deliver` real attempts of its own,
//! however long the message before it failed. A failing aggregate takes no
//! handler slot from the others while it waits; its waiting messages do
//! count toward `max_ack_pending`, so an aggregate with more messages in
//! the stream than that window holds stops the consumer from receiving new
//! ones until its failing message succeeds or is dead-lettered (the
//! failing message itself still comes back: JetStream redelivers past the
//! window).
//!
//! The guarantee, exactly: **within one process, a handler of a message of
//! an aggregate starts only once every earlier message of that aggregate
//! that this process received has been settled** — acked, or dead-lettered,
//! or nakked for a retry and then either handled on its return or given up
//! because it did not come back to this process within its backoff delay
//! plus `ack_wait` plus 1 s. "Earlier" is stream order. A process that is
//! its durable's one reader ([failover](SubscriberBuilder::failover) or the
//! [reader lease](SubscriberBuilder::reader_lease)) gives up on no message
//! by time: past that grace it asks the server (every second) and waits
//! until the message is back, or the consumer's ack floor passed it, or the
//! stream no longer holds it (a consumer leader change can delay a
//! redelivery well past the ack wait). Outside that:
//!
//! - messages JetStream delivered to another process bound to the same
//!   durable are not waited for (they are the ones a lane gives up on), so
//!   across processes one aggregate's messages may run in parallel or out
//!   of order. A subscriber with an inbox keeps a second process from
//!   reading beside the first: `build` refuses one that starts while
//!   another reads ([`SubscriberBuildError::DurableInUse`]), and the
//!   [reader lease](SubscriberBuilder::reader_lease) makes one that got
//!   past that check stand by. Without an inbox, run one process per durable, or give
//!   each process its own filter subject, or split the stream into
//!   partitions by aggregate and give each process its own
//!   ([`partitions`](SubscriberBuilder::partitions));
//! - a message given up on that turns up later, or one JetStream redelivers
//!   after its ack wait (its process crashed, or its progress acks were
//!   lost) after later messages of its aggregate were handled, is handled
//!   when it arrives;
//! - after a restart, what a crashed process had received and not
//!   acknowledged would come back only after its ack wait, while later
//!   messages arrive at once: with
//!   [`keep_order`](SubscriberBuilder::keep_order)
//!   (given the consumer's inbox; handlers made by the inbox bring it) the
//!   new process waits for those it has not applied and hands them back to
//!   JetStream, which redelivers them at once, so the guarantee above holds
//!   across the crash too and the crash costs a restart, not the ack wait;
//!   see also
//!   [Shutdown](#shutdown).
//!
//! A message whose JetStream metadata (stream sequence, delivery count)
//! cannot be read cannot be put in order: it is terminated and logged
//! (`outcome="invalid_metadata"`), never left to its ack wait.
//!
//! # Shutdown
//!
//! [`RunningSubscriber::shutdown`] (or cancelling the token given to
//! [`Subscriber::run`]) stops fetching, naks at once what the client had
//! buffered and every message waiting in a lane, lets running handlers
//! finish until [`shutdown_timeout`](SubscriberBuilder::shutdown_timeout),
//! then drops the rest (a transaction they held rolls back) and naks their
//! messages. Messages the server had sent but the client not yet received
//! are redelivered after `ack_wait`.
//!
//! A nats-server 2.9 behaviour to know: when a handed-back message is due
//! while the only pull requests the server holds belong to a client that
//! has gone (this subscriber, just stopped), the server delivers the
//! consumer's last new message once more and leaves the handed-back one to
//! its `ack_wait`. Nothing is lost, but a restart may see a message twice
//! or out of order; the inbox makes the duplicate harmless.
//!
//! # Exactly-once effects
//!
//! Delivery is at least once. Handlers whose effects must happen once
//! record each message id in an inbox in the same transaction as their
//! effects: `txoutbox_sea_orm::Inbox::handler` turns a handler that takes a
//! SeaORM unit of work into a handler for [`on`](SubscriberBuilder::on).
//!
//! # Tracing and metrics
//!
//! Each message is handled in an `outbox.consume` span with the fields
//! `consumer`, `stream_sequence`, `delivery`, `event`, `event_version`,
//! `message_id`, `aggregate_type`, `aggregate_id`, `sequence`,
//! `correlation_id`, `outcome`, and, when the producer sent a
//! `traceparent`, `trace_id` and `parent_span_id`: the producer's trace
//! continues on the consumer side. Without the `opentelemetry` feature this
//! crate does not depend on OpenTelemetry, and a `tracing` layer can map
//! these fields to a remote parent; with it, the span is the OpenTelemetry
//! child of the message's `traceparent` (and `tracestate`) under a
//! `tracing-opentelemetry` layer, so the handler (and what it records and
//! publishes in turn) joins the producer's trace.
//! Metrics are listed in [`metrics`].

mod builder;
mod config;
mod dead_letters;
mod groups;
mod handlers;
mod health;
mod holds;
mod in_process;
mod lanes;
mod setup;
mod takeover;

pub use dead_letters::policy as dead_lettering;
pub use dead_letters::replay as dead_letter_replay;
pub use health::metrics;

use std::sync::Arc;

use async_nats::jetstream::consumer::PullConsumer;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use builder::SubscriberBuilder;
pub use config::backoff::Backoff;
pub use config::error::{SubscriberBuildError, SubscriberError};
pub use config::settings::{BackoffSettings, SubscriberSettings};
pub use dead_letters::policy::{DeadLetterKind, DeadLetterPolicy};
#[allow(deprecated)]
pub use groups::inbox_groups::{InboxBatches, InboxGroups};
pub use health::probe::{ConsumerLag, SubscriberHealth, SubscriberProbe};

use setup::shared::Shared;

/// A subscriber run in this process without JetStream, for the testing
/// kit's `TestSubscriber` (`txoutbox_testing`, feature `nats`): see
/// `SubscriberBuilder::into_in_process`. Not part of the public API:
/// outside semver, it may change in any release.
#[doc(hidden)]
pub mod __in_process {
    pub use super::in_process::runner::{InProcess, InProcessMessage, InProcessOutcome};
    pub use super::lanes::dispatch::Acked;
}

/// A typed subscriber on a durable JetStream pull consumer (or one per
/// owned partition, see [`SubscriberBuilder::partitions`]), built and
/// ready to run (see the [module docs](self)).
pub struct Subscriber {
    shared: Arc<Shared>,
    /// The durable itself, or one consumer per owned partition; empty
    /// while `deferred`.
    consumers: Vec<PullConsumer>,
    /// Built while the client was not connected: what `run` sets up on the
    /// server once it is.
    deferred: Option<setup::server::Setup>,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber")
            .field("consumer", &self.shared.consumer)
            .field("stream", &self.shared.stream)
            .finish_non_exhaustive()
    }
}

impl Subscriber {
    /// A builder for a subscriber of the durable consumer `durable`.
    ///
    /// With a typed handler without an inbox (so `unordered()`: effects at
    /// least once), dead letters to their own subject, run until a token is
    /// cancelled:
    ///
    /// ```no_run
    /// # use txoutbox_core::IntegrationEvent;
    /// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
    /// # #[event(name = "payment.received")] struct PaymentReceived { order_id: String, cents: i64 }
    /// # async fn run(nats: async_nats::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use txoutbox_core::{Delivery, HandlerError};
    /// use txoutbox_nats::subscriber::{DeadLetterPolicy, Subscriber};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// async fn on_payment(event: PaymentReceived, delivery: Delivery) -> Result<(), HandlerError> {
    ///     tracing::info!(order = %event.order_id, cents = event.cents, seq = delivery.sequence(), "paid");
    ///     Ok(())
    /// }
    ///
    /// let subscriber = Subscriber::builder(nats, "billing")
    ///     .stream("EVENTS")
    ///     .filter_subject("events.payment.>")
    ///     .dead_letter(DeadLetterPolicy::publish_to("dlq.billing"))
    ///     .on(on_payment)
    ///     .unordered()
    ///     .build()
    ///     .await?;
    /// let shutdown = CancellationToken::new(); // cancel it on SIGTERM
    /// subscriber.run(shutdown).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// Effects applied exactly once, in per-aggregate order across crashes
    /// and behind dead letters: `.on(inbox.handler(on_payment))` with
    /// `txoutbox_sea_orm::Inbox`, for a handler that also takes the
    /// message's unit of work (then no `unordered()`).
    ///
    /// `jetstream` is the service's NATS [`Client`](async_nats::Client) (the
    /// one its publisher uses) or a `jetstream::Context`.
    pub fn builder(
        jetstream: impl crate::IntoJetStream,
        durable: impl Into<String>,
    ) -> SubscriberBuilder {
        SubscriberBuilder::new(jetstream.into_jetstream(), durable.into())
    }

    /// The durable consumer's name (with partitions, the base name: the
    /// inbox's and the dead letters' key).
    pub fn durable(&self) -> &str {
        &self.shared.consumer
    }

    /// The names of the JetStream consumers it reads: [`durable`](Self::durable),
    /// or `<durable>-p<k>` for each owned partition `k`.
    pub fn consumers(&self) -> Vec<String> {
        match &self.deferred {
            Some(setup) => setup.names(),
            None => self
                .consumers
                .iter()
                .map(|consumer| consumer.cached_info().name.clone())
                .collect(),
        }
    }

    /// The stream it reads.
    pub fn stream(&self) -> &str {
        &self.shared.stream
    }

    /// Where dead letters are published, if the policy publishes them.
    pub fn dead_letter_subject(&self) -> Option<String> {
        self.shared.dead_letter.subject(&self.shared.consumer)
    }

    /// Handles messages until `shutdown` is cancelled, then shuts down in
    /// order (see [Shutdown](self#shutdown)). Returns an error only if the
    /// consumer is deleted under it, or, for a subscriber built while the
    /// broker was away, if setting up its consumers fails once the broker
    /// answers ([`SubscriberError::Setup`]); connection trouble is logged
    /// and retried. Dropping the future stops everything at once, without
    /// handing messages back (they are redelivered after `ack_wait`).
    ///
    /// With partitions, each owned partition's consumer is read by a loop
    /// of its own; should one consumer be deleted, the others shut down in
    /// order and the error is returned.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), SubscriberError> {
        if let Some(setup) = self.deferred.take() {
            match setup.when_connected(&self.shared, &shutdown).await {
                Some(Ok(consumers)) => self.consumers = consumers,
                Some(Err(err)) => return Err(SubscriberError::Setup(err)),
                None => return Ok(()), // shut down before the broker answered
            }
        }
        let stop = shutdown.child_token();
        let cleaning = health::cleanup::run(Arc::clone(&self.shared), stop.clone());
        // Ends each pause (the inbox's database away) once it answers.
        let watching = self
            .shared
            .pause
            .watch(self.shared.inbox.clone(), stop.clone());
        let reading = async {
            let result = takeover::standby::read_under_lease(
                &self.shared,
                &self.consumers,
                &stop,
                |session| read(Arc::clone(&self.shared), self.consumers.clone(), session),
            )
            .await;
            stop.cancel(); // ends the cleanup
            result
        };
        let (result, (), ()) = tokio::join!(reading, cleaning, watching);
        result
    }

    /// Runs on a task of its own.
    pub fn spawn(self) -> RunningSubscriber {
        let shutdown = CancellationToken::new();
        let health = SubscriberProbe::new(Arc::clone(&self.shared), self.consumers());
        let task = tokio::spawn(health.watch(self.run(shutdown.clone())));
        RunningSubscriber {
            shutdown,
            health,
            task: Some(task),
        }
    }
}

/// Reads `consumers` until `stop` is cancelled, one fetch loop each;
/// should one consumer be deleted, the others shut down in order and the
/// error is returned.
async fn read(
    shared: Arc<Shared>,
    consumers: Vec<PullConsumer>,
    stop: CancellationToken,
) -> Result<(), SubscriberError> {
    let mut loops: futures::stream::FuturesUnordered<_> = consumers
        .into_iter()
        .enumerate()
        .map(|(index, consumer)| {
            // One task applies released holds for all of them.
            let watch_holds = index == 0;
            lanes::fetch::run(Arc::clone(&shared), consumer, stop.clone(), watch_holds)
        })
        .collect();
    let mut result = Ok(());
    while let Some(ended) = futures::StreamExt::next(&mut loops).await {
        if let Err(err) = ended
            && result.is_ok()
        {
            stop.cancel();
            result = Err(err);
        }
    }
    result
}

/// A [`Subscriber`] running on its own task. Dropping it starts a graceful
/// shutdown that completes in the background.
#[derive(Debug)]
pub struct RunningSubscriber {
    shutdown: CancellationToken,
    health: SubscriberProbe,
    task: Option<JoinHandle<Result<(), SubscriberError>>>,
}

impl RunningSubscriber {
    /// Shuts down in order and waits until it has.
    pub async fn shutdown(mut self) -> Result<(), SubscriberError> {
        self.shutdown.cancel();
        match self.task.take() {
            Some(task) => task.await?,
            None => Ok(()),
        }
    }

    /// Waits until the subscriber stops on its own (its consumer was deleted)
    /// or is shut down through its [token](Self::shutdown_token).
    pub async fn stopped(mut self) -> Result<(), SubscriberError> {
        match self.task.take() {
            Some(task) => task.await?,
            None => Ok(()),
        }
    }

    /// Its [`SubscriberProbe`]: whether it runs, is connected and its
    /// consumer is on the server; its lag and held aggregates.
    pub fn health(&self) -> SubscriberProbe {
        self.health.clone()
    }

    /// The token that shuts it down, to share with other shutdown logic.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Whether it has stopped.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops it at once, as a crash would: running handlers are dropped
    /// (their transactions roll back) and no message is acked or nakked;
    /// JetStream redelivers them after `ack_wait`.
    pub fn abort(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for RunningSubscriber {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.shutdown.cancel();
        }
    }
}
