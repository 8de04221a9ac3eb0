//! What every task of one running subscriber shares.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_nats::jetstream;
use std::sync::{Arc, Mutex};
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};
use txoutbox_core::EventRegistry;
use txoutbox_core::HandlerError;
use txoutbox_core::cleanup::Cleanup;
use txoutbox_core::consumer::{ConsumerInbox, FailureCause};

use crate::subscriber::config::Backoff;
use crate::subscriber::dead_letters::DeadLetterPolicy;
use crate::subscriber::groups::InboxGroups;
use crate::subscriber::handlers::Handlers;
use crate::subscriber::health::Pause;
use crate::subscriber::holds::Holds;
use crate::subscriber::takeover::{Gate, Lease};

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
    /// Handlers running at once.
    pub(crate) max_in_flight: usize,
    /// One permit per running handler (`max_in_flight` in all).
    pub(crate) permits: Arc<Semaphore>,
    /// Messages received and not yet settled (see `ordering::Held`).
    pub(crate) held: Arc<AtomicUsize>,
    /// Delays between deliveries of a failing message.
    pub(crate) backoff: Backoff,
    /// What happens to messages that cannot be handled.
    pub(crate) dead_letter: DeadLetterPolicy,
    /// Dead-letter events no handler takes instead of acking them.
    pub(crate) dead_letter_unhandled: bool,
    /// The unhandled event names already logged (once each).
    pub(crate) unhandled_seen: Mutex<HashSet<String>>,
    /// How long shutdown waits for running handlers.
    pub(crate) shutdown_timeout: Duration,
    /// With failover, the pin timeout (see `SubscriberBuilder::failover`).
    pub(crate) failover: Option<Duration>,
    /// With failover, the last pin id this process was given: its pin while
    /// the server still names it.
    pub(crate) pin: Mutex<crate::subscriber::takeover::Pin>,
    /// What the consumer applied: set, a starting subscriber waits for what
    /// was outstanding before it (see `keep_order`).
    pub(crate) applied: Option<Arc<dyn txoutbox_core::consumer::AppliedMessages>>,
    /// Held aggregates and where their messages are parked (set with
    /// `keep_order`).
    pub(crate) holds: Option<Arc<Holds>>,
    /// The inbox whose applied rows this subscriber deletes, and when.
    pub(crate) cleanup: Option<(Arc<dyn ConsumerInbox>, Cleanup)>,
    /// The inbox that applies messages in groups, and how (`None`: one
    /// transaction per message).
    pub(crate) inbox_groups: Option<(Arc<dyn ConsumerInbox>, InboxGroups)>,
    /// The inbox the handlers apply through, if any: it tells whose fault a
    /// failure is, and answers the probes of a pause.
    pub(crate) inbox: Option<Arc<dyn ConsumerInbox>>,
    /// Paused while the inbox's database is away.
    pub(crate) pause: Pause,
    /// Where its setup on the server stands (consumers created or
    /// verified), for its health.
    pub(crate) setup: super::status::SetupStatus,
    /// The reader lease, for a subscriber that keeps order on an inbox
    /// that keeps leases (see `lease`).
    pub(crate) lease: Option<Lease>,
    /// Whether handlers may start: while the lease is held, or always
    /// without one.
    pub(crate) gate: Gate,
}

impl Shared {
    /// A handler slot (`max_in_flight`) to start a handler in, once the
    /// [`Gate`] lets handlers start: checked again after the slot is
    /// taken, so a process that lost its lease (or woke from a freeze past
    /// it) starts nothing. Fails only if the semaphore is closed (never).
    pub(crate) async fn slot(&self) -> Result<OwnedSemaphorePermit, AcquireError> {
        loop {
            self.gate.held().await;
            let slot = Arc::clone(&self.permits).acquire_owned().await?;
            if self.gate.holds() {
                return Ok(slot);
            }
        }
    }

    /// Whose fault a handler's error is: the handler's own, a conflict, or
    /// an outage (said by the handler, or told by its inbox).
    pub(crate) fn cause_of(&self, error: &HandlerError) -> FailureCause {
        if error.is_unavailable() {
            return FailureCause::Unavailable;
        }
        self.cause_of_error(error.get_ref())
    }

    /// Whose fault an inbox's error is (see [`cause_of`](Self::cause_of)).
    pub(crate) fn cause_of_error(&self, error: &(dyn std::error::Error + 'static)) -> FailureCause {
        self.inbox
            .as_ref()
            .map_or(FailureCause::Handler, |inbox| inbox.cause_of(error))
    }

    /// How often progress acks keep held messages alive: a third of the
    /// ack wait, so one lost progress ack is survivable.
    pub(crate) fn progress_interval(&self) -> Duration {
        (self.ack_wait / 3).max(Duration::from_millis(50))
    }

    /// Updates the in-flight gauge: messages held, whether running,
    /// waiting for a handler slot or waiting behind their aggregate.
    pub(crate) fn report_in_flight(&self) {
        let held = self.held.load(Ordering::Relaxed);
        ::metrics::gauge!(crate::subscriber::health::IN_FLIGHT, "consumer" => Arc::clone(&self.consumer))
            .set(held as f64);
    }

    /// The pin this process was last given (with failover).
    pub(crate) fn pin(&self) -> std::sync::MutexGuard<'_, crate::subscriber::takeover::Pin> {
        // No code panics while holding the lock; recover it regardless.
        self.pin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How long past its due time a lane waits for a message nakked for a
    /// retry before later messages of its aggregate go on without it.
    ///
    /// The subscriber reads every message the server sends as soon as it
    /// arrives, so a message that is due and not back has not been
    /// redelivered to this process. JetStream redelivers a nakked message
    /// after its delay; should the nak itself be lost, after the ack wait
    /// (counted from the last progress ack, sent while its handler ran). So
    /// a message not back within its delay plus the ack wait plus a margin
    /// went to another process bound to the same durable (or left the
    /// stream), and waiting longer would stall its aggregate for nothing.
    /// A subscriber that is its durable's one reader (failover, the reader
    /// lease) asks the server instead, past this grace, and waits while the
    /// message is unsettled (see `lanes::overdue`): a consumer leader change
    /// delays a redelivery past it.
    pub(crate) fn away_grace(&self) -> Duration {
        self.ack_wait + AWAY_MARGIN
    }
}

/// Slack on top of the ack wait before a lane gives up on a message away
/// (network and scheduling delays of the redelivery).
const AWAY_MARGIN: Duration = Duration::from_secs(1);
