//! Pausing while the inbox's database is away. An outage is not a handler
//! failure: when an attempt at a message fails because the database cannot
//! be reached, begun, written or committed to
//! ([`FailureCause::Unavailable`](txoutbox_core::consumer::FailureCause::Unavailable)),
//! the message goes back to its lane, unsettled, and the whole subscriber
//! pauses: it starts no handler and no group, keeps everything it holds
//! alive with progress acks, and spends none of its messages' deliveries.
//! A task probes the database ([`ConsumerInbox::probe`]) every quarter
//! second at first, then every 2 s at most, each probe bounded by its own
//! short timeout (not the pool's acquire timeout); at its first answer the
//! subscriber resumes and applies what it held, in each aggregate's order.
//!
//! While paused the subscriber still takes what the server sends (it is
//! bounded by the consumer's `max_ack_pending`, as always): a message the
//! client received and nobody read would get no progress ack and come back
//! after its ack wait with one more delivery counted, which is exactly what
//! the pause is there to avoid.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use txoutbox_core::backoff::{Doubling, jittered};
use txoutbox_core::consumer::{ConsumerInbox, FailureCause};

use super::metrics::PAUSED;

/// First pause between probes.
const FIRST_PROBE: Duration = Duration::from_millis(250);
/// Longest pause between probes: the database's return is noticed within
/// this (plus one probe).
const LONGEST_PROBE_PAUSE: Duration = Duration::from_secs(2);
/// How long one probe may take before it counts as no answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// About how long an attempt that met a conflict (a deadlock, a
/// serialization failure) waits before it runs again (jittered).
const CONFLICT_PAUSE: Duration = Duration::from_millis(50);

/// Whether a subscriber is paused, and why.
pub(crate) struct Pause {
    consumer: Arc<str>,
    /// `true` while paused.
    paused: watch::Sender<bool>,
    /// Since when and why, while paused.
    cause: Mutex<Option<(Instant, String)>>,
}

impl Pause {
    /// What an attempt that failed through no fault of its message does
    /// before the message goes back to its lane: an outage pauses the
    /// subscriber; a conflict waits a moment, so the transactions that
    /// collided do not collide again at once.
    pub(crate) async fn interrupted(&self, cause: FailureCause, reason: &str) {
        match cause {
            FailureCause::Conflict => {
                tracing::debug!(consumer = %self.consumer, error = %reason, "a conflict with other transactions: applied again, no delivery spent");
                tokio::time::sleep(jittered(CONFLICT_PAUSE)).await;
            }
            _ => self.pause(reason),
        }
    }

    /// A running (not paused) subscriber's.
    pub(crate) fn new(consumer: Arc<str>) -> Self {
        Self {
            consumer,
            paused: watch::Sender::new(false),
            cause: Mutex::new(None),
        }
    }

    /// Pauses the subscriber because of `reason` (the database is away),
    /// unless it is paused already.
    pub(crate) fn pause(&self, reason: &str) {
        let mut cause = self.cause();
        if cause.is_none() {
            tracing::warn!(
                consumer = %self.consumer,
                error = %reason,
                "the inbox's database is away: pausing (no handler starts, what is held is kept \
                 and no delivery is spent) until it answers"
            );
            *cause = Some((Instant::now(), reason.to_owned()));
            ::metrics::gauge!(PAUSED, "consumer" => Arc::clone(&self.consumer)).set(1.0);
            self.paused.send_replace(true);
        }
    }

    /// Whether it is paused.
    pub(crate) fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Returns once the subscriber is not paused (at once when it is not).
    pub(crate) async fn resumed(&self) {
        let mut paused = self.paused.subscribe();
        // The sender lives as long as `self`.
        let _ = paused.wait_for(|paused| !paused).await;
    }

    /// Why it is paused and for how long so far, while it is.
    pub(crate) fn paused(&self) -> Option<(Duration, String)> {
        self.cause()
            .as_ref()
            .map(|(since, reason)| (since.elapsed(), reason.clone()))
    }

    fn resume(&self) {
        if let Some((since, _)) = self.cause().take() {
            tracing::info!(
                consumer = %self.consumer,
                paused_for = ?since.elapsed(),
                "the inbox's database answers again: resuming"
            );
        }
        ::metrics::gauge!(PAUSED, "consumer" => Arc::clone(&self.consumer)).set(0.0);
        self.paused.send_replace(false);
    }

    fn cause(&self) -> std::sync::MutexGuard<'_, Option<(Instant, String)>> {
        self.cause.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends each pause once `inbox` answers a probe (without an inbox, after
    /// the first pause between probes), until `stop` is cancelled.
    pub(crate) async fn watch(
        &self,
        inbox: Option<Arc<dyn ConsumerInbox>>,
        stop: CancellationToken,
    ) {
        let mut paused = self.paused.subscribe();
        loop {
            tokio::select! {
                changed = paused.wait_for(|paused| *paused) => if changed.is_err() { return },
                () = stop.cancelled() => return,
            }
            let mut pauses = Doubling::new(FIRST_PROBE, LONGEST_PROBE_PAUSE);
            loop {
                tokio::select! {
                    () = tokio::time::sleep(pauses.next_pause()) => {}
                    () = stop.cancelled() => return,
                }
                let Some(inbox) = &inbox else { break };
                match tokio::time::timeout(PROBE_TIMEOUT, inbox.probe()).await {
                    Ok(Ok(())) => break,
                    Ok(Err(err)) => {
                        tracing::debug!(consumer = %self.consumer, error = %txoutbox_core::ErrorChain(&*err), "paused: the inbox's database does not answer yet");
                    }
                    Err(_) => {
                        tracing::debug!(consumer = %self.consumer, timeout = ?PROBE_TIMEOUT, "paused: the inbox's database's probe timed out");
                    }
                }
            }
            self.resume();
        }
    }
}
