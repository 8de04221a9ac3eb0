//! Held aggregates (with [`keep_order`](super::SubscriberBuilder::keep_order)):
//! a message of an aggregate that goes to the dead letters because it could
//! not be applied holds its aggregate; later messages of the aggregate are
//! parked behind it in the consumer's store (the inbox) and acknowledged,
//! so a held aggregate takes nothing of JetStream's window and other
//! aggregates go on. An operator releases the aggregate through the store
//! (`outbox_sea_orm::Inbox::release`); within [`RELEASE_POLL`] the
//! subscriber applies what is parked, in order, through the same handlers.
//!
//! Which aggregates are held is read from the store when the subscriber
//! starts and every [`RELEASE_POLL`] after, so a hold survives restarts and
//! is seen by every process of the consumer within that period. Changes to
//! the held set (a hold, a park, a refresh, a replay) happen one at a time
//! under one lock, so no message of a held aggregate is applied between
//! its hold being recorded and the set knowing it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use outbox_core::backoff::Doubling;
use outbox_core::{BoxError, HeldMessages, Hold, MessageId, ParkedMessage, Release, Unpark, wire};
use tokio_util::sync::CancellationToken;

use super::dead_letter::DeadLetterKind;
use super::dispatch::{self, Decision, Delivered, Incoming, header, header_pairs};
use super::metrics::HELD_AGGREGATES;
use super::ordering::{LaneKey, lane_key};
use super::shared::Shared;

/// How often the subscriber reads which aggregates are held and released.
pub(crate) const RELEASE_POLL: Duration = Duration::from_secs(1);

/// Attempts at recording a hold before the message is dead-lettered
/// without one (and its aggregate goes on; logged at error level).
const HOLD_ATTEMPTS: u32 = 5;

/// The held aggregates of one subscriber, and its store.
pub(crate) struct Holds {
    store: Arc<dyn HeldMessages>,
    held: Mutex<HashSet<LaneKey>>,
    changes: tokio::sync::Mutex<()>,
}

impl Holds {
    /// Holds kept in `store`; none known until [`refresh`](Self::refresh).
    pub(crate) fn new(store: Arc<dyn HeldMessages>) -> Self {
        Self {
            store,
            held: Mutex::default(),
            changes: tokio::sync::Mutex::new(()),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashSet<LaneKey>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `key`'s aggregate is held (a cheap check on every message).
    pub(crate) fn is_held(&self, key: &LaneKey) -> bool {
        let held = self.held();
        !held.is_empty() && held.contains(key)
    }

    /// Reads the holds from the store; returns them.
    pub(crate) async fn refresh(&self, consumer: &str) -> Result<Vec<Hold>, BoxError> {
        let _change = self.changes.lock().await;
        let holds = self.store.holds().await?;
        let keys: HashSet<LaneKey> = holds
            .iter()
            .map(|hold| lane_key(&hold.aggregate_type, &hold.aggregate_id))
            .collect();
        ::metrics::gauge!(HELD_AGGREGATES, "consumer" => consumer.to_owned())
            .set(keys.len() as f64);
        *self.held() = keys;
        Ok(holds)
    }

    /// Holds `incoming`'s aggregate behind it: it could not be applied, for
    /// `reason`. Retried a few times; should the store stay unreachable,
    /// the message is dead-lettered without a hold (logged).
    pub(crate) async fn hold_behind(
        &self,
        shared: &Shared,
        incoming: &Incoming,
        key: &LaneKey,
        kind: DeadLetterKind,
        reason: &str,
    ) {
        let Some(message) = parked(incoming, Some(format!("{kind}: {reason}"))) else {
            return;
        };
        let (aggregate_type, aggregate_id) =
            (message.aggregate_type.clone(), message.aggregate_id.clone());
        let _change = self.changes.lock().await;
        let mut delay = Doubling::new(Duration::from_millis(200), Duration::from_secs(2));
        for attempt in 1..=HOLD_ATTEMPTS {
            match self.store.park(message.clone()).await {
                Ok(()) => {
                    self.held().insert(Arc::clone(key));
                    tracing::error!(
                        consumer = %shared.consumer, %aggregate_type, %aggregate_id,
                        message_id = %message.message_id, %reason,
                        "a message could not be applied: its aggregate is held behind it \
                         (later messages are parked) until an operator releases it"
                    );
                    return;
                }
                Err(err) if attempt == HOLD_ATTEMPTS => {
                    tracing::error!(
                        consumer = %shared.consumer, %aggregate_type, %aggregate_id,
                        message_id = %message.message_id, error = %err,
                        "cannot record the hold of an aggregate behind a dead message; \
                         later messages of the aggregate will be applied without it"
                    );
                }
                Err(err) => {
                    let pause = delay.next_pause();
                    tracing::warn!(consumer = %shared.consumer, error = %err, retry_in = ?pause, "recording a hold");
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// Parks `incoming` if its aggregate is held: `Ok(true)` when it was
    /// parked (acknowledge it), `Ok(false)` when the aggregate is not held
    /// (any more: a release was applied meanwhile), and the store's error
    /// when parking failed (deliver it again later).
    pub(crate) async fn park_if_held(
        &self,
        incoming: &Incoming,
        key: &LaneKey,
    ) -> Result<bool, BoxError> {
        let _change = self.changes.lock().await;
        if !self.is_held(key) {
            return Ok(false);
        }
        let Some(message) = parked(incoming, None) else {
            return Ok(false);
        };
        self.store.park(message).await?;
        Ok(true)
    }

    /// Applies what is parked behind a released hold, in order, and lets
    /// the aggregate go on; should a message fail, the aggregate is held
    /// behind it again.
    async fn replay(
        &self,
        shared: &Arc<Shared>,
        hold: &Hold,
        release: Release,
        stop: &CancellationToken,
    ) {
        let key = lane_key(&hold.aggregate_type, &hold.aggregate_id);
        let _change = self.changes.lock().await;
        let parked = match self
            .store
            .parked(hold.aggregate_type.clone(), hold.aggregate_id.clone())
            .await
        {
            Ok(parked) => parked,
            Err(err) => {
                tracing::warn!(consumer = %shared.consumer, error = %err, "reading parked messages; the release is retried");
                return;
            }
        };
        let mut applied = 0;
        for message in parked {
            if stop.is_cancelled() {
                return; // the rest stays parked; the release holds
            }
            let outcome = if message.message_id == hold.message_id && release == Release::Skip {
                Unpark::Skipped
            } else {
                match apply(shared, &message).await {
                    Ok(()) => Unpark::Applied,
                    Err(reason) => Unpark::HeldAgain { reason },
                }
            };
            let again = matches!(outcome, Unpark::HeldAgain { .. });
            if let Err(err) = self.store.unpark(message, outcome).await {
                tracing::warn!(consumer = %shared.consumer, error = %err, "settling a parked message; the release is retried");
                return;
            }
            if again {
                tracing::error!(
                    consumer = %shared.consumer, aggregate_type = %hold.aggregate_type,
                    aggregate_id = %hold.aggregate_id, applied,
                    "a released aggregate failed again: it is held behind the message that failed"
                );
                return;
            }
            applied += 1;
        }
        self.held().remove(&key);
        tracing::info!(
            consumer = %shared.consumer, aggregate_type = %hold.aggregate_type,
            aggregate_id = %hold.aggregate_id, applied, release = release.as_str(),
            "released aggregate goes on"
        );
    }
}

/// Reads the holds every [`RELEASE_POLL`] and applies released ones, until
/// `stop` is cancelled.
pub(crate) async fn watch(shared: Arc<Shared>, holds: Arc<Holds>, stop: CancellationToken) {
    let mut every = tokio::time::interval(RELEASE_POLL);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        let listed = match holds.refresh(&shared.consumer).await {
            Ok(listed) => listed,
            Err(err) => {
                tracing::warn!(consumer = %shared.consumer, error = %err, "reading held aggregates");
                continue;
            }
        };
        for hold in listed {
            if let Some(release) = hold.release {
                holds.replay(&shared, &hold, release, &stop).await;
            }
        }
    }
}

/// Runs a parked message through its handler; the reason when it failed.
async fn apply(shared: &Arc<Shared>, message: &ParkedMessage) -> Result<(), String> {
    let delivered = Delivered {
        subject: &message.subject,
        headers: message
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect(),
        payload: &message.payload,
        stream_sequence: message.stream_sequence,
        deliveries: 1,
    };
    let span = tracing::info_span!(
        "outbox.consume.released",
        consumer = %shared.consumer,
        stream_sequence = message.stream_sequence,
        message_id = %message.message_id,
    );
    match dispatch::decide_delivered(shared, delivered, &span)
        .await
        .decision
    {
        Decision::Ack { .. } => Ok(()),
        Decision::Retry { reason, .. } => Err(reason),
        Decision::Dead { kind, reason } => Err(format!("{kind}: {reason}")),
    }
}

/// `incoming` as a message to park, if its headers name its aggregate and
/// id (a message that does not cannot be held: it is dead-lettered as
/// before).
fn parked(incoming: &Incoming, reason: Option<String>) -> Option<ParkedMessage> {
    let message = &incoming.message;
    let pairs = header_pairs(message);
    let id = header(&pairs, wire::ID)?.parse::<MessageId>().ok()?;
    let aggregate_type = header(&pairs, wire::AGGREGATE_TYPE)?;
    let aggregate_id = header(&pairs, wire::SUBJECT)?;
    Some(ParkedMessage::new(
        id,
        aggregate_type,
        aggregate_id,
        incoming.stream_sequence,
        message.subject.as_str(),
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect(),
        message.payload.to_vec(),
        reason,
    ))
}
