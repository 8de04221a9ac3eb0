//! What every task of one running subscriber shares.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use outbox_core::EventRegistry;
use tokio::sync::Semaphore;

use super::backoff::Backoff;
use super::dead_letter::DeadLetterPolicy;
use super::handler::Handlers;

/// The settings and handles of one subscriber.
pub(crate) struct Shared {
    /// The durable consumer's name (also the `consumer` metrics label).
    pub(crate) consumer: Arc<str>,
    /// The stream it reads.
    pub(crate) stream: Arc<str>,
    /// JetStream, for dead-letter copies.
    pub(crate) context: jetstream::Context,
    /// The connection, for progress acks.
    pub(crate) client: async_nats::Client,
    /// Decodes payloads into handler types.
    pub(crate) registry: Arc<EventRegistry>,
    /// The handlers, by event name.
    pub(crate) handlers: Handlers,
    /// JetStream's delivery limit.
    pub(crate) max_deliver: u64,
    /// JetStream's ack wait.
    pub(crate) ack_wait: Duration,
    /// Messages held at once.
    pub(crate) max_in_flight: usize,
    /// One permit per message held (`max_in_flight` in all).
    pub(crate) permits: Arc<Semaphore>,
    /// Delays between deliveries of a failing message.
    pub(crate) backoff: Backoff,
    /// What happens to messages that cannot be handled.
    pub(crate) dead_letter: DeadLetterPolicy,
    /// Ack events no handler takes instead of dead-lettering them.
    pub(crate) ignore_unhandled: bool,
    /// How long shutdown waits for running handlers.
    pub(crate) shutdown_timeout: Duration,
}

impl Shared {
    /// How often progress acks keep held messages alive: a third of the
    /// ack wait, so one lost progress ack is survivable.
    pub(crate) fn progress_interval(&self) -> Duration {
        (self.ack_wait / 3).max(Duration::from_millis(50))
    }

    /// Updates the in-flight gauge.
    pub(crate) fn report_in_flight(&self) {
        let held = self
            .max_in_flight
            .saturating_sub(self.permits.available_permits());
        ::metrics::gauge!(super::metrics::IN_FLIGHT, "consumer" => Arc::clone(&self.consumer))
            .set(held as f64);
    }

    /// How long past its due time a lane waits for a message nakked for a
    /// retry before later messages of its aggregate go on without it.
    pub(crate) fn away_grace(&self) -> Duration {
        self.ack_wait.min(Duration::from_secs(5))
    }
}
