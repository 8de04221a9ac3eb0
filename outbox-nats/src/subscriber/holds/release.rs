//! Applying a released hold (see [`hold`](super::hold)): every
//! [`RELEASE_POLL`] the subscriber reads which aggregates are held and
//! released, and applies what is parked behind a released one, in order,
//! through the same handlers (a few released aggregates at once).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use txoutbox_core::consumer::{BoxError, Hold, ParkedMessage, Release, Unpark};

use super::hold::Holds;
use crate::subscriber::lanes::dispatch::{self, Decision, Delivered};
use crate::subscriber::lanes::lane_key;
use crate::subscriber::setup::Shared;

/// How often the subscriber reads which aggregates are held and released.
pub(crate) const RELEASE_POLL: Duration = Duration::from_secs(1);

/// Released aggregates replayed at once, at most (and at most the
/// subscriber's `max_in_flight`): after an incident hundreds are released
/// together.
const REPLAYED_AT_ONCE: usize = 8;

/// A parked message taken up again after a release, and what became of it.
pub(crate) type Replayed = (ParkedMessage, Unpark);

/// Applies what is parked behind a released hold, in order, and lets
/// the aggregate go on; should a message fail, the aggregate is held
/// behind it again. Returns the parked messages it settled. The caller
/// holds [`Holds::changing`].
async fn replay(
    holds: &Holds,
    shared: &Arc<Shared>,
    hold: &Hold,
    release: Release,
    stop: &CancellationToken,
) -> Vec<Replayed> {
    let key = lane_key(&hold.aggregate_type, &hold.aggregate_id);
    let mut settled = Vec::new();
    let parked = match holds
        .store()
        .parked(hold.aggregate_type.clone(), hold.aggregate_id.clone())
        .await
    {
        Ok(parked) => parked,
        Err(err) => {
            tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&*err), "reading parked messages; the release is retried");
            return settled;
        }
    };
    let mut applied = 0;
    for message in parked {
        if stop.is_cancelled() {
            return settled; // the rest stays parked; the release holds
        }
        let outcome = if message.message_id == hold.message_id && release == Release::Skip {
            Unpark::Skipped
        } else {
            match apply(shared, &message).await {
                Ok(()) => Unpark::Applied,
                Err(Failure::Handler(reason)) => Unpark::HeldAgain { reason },
                Err(Failure::Interrupted(reason)) => {
                    // Not the message's fault: the rest stays parked and
                    // the release is applied again at the next poll.
                    tracing::warn!(consumer = %shared.consumer, error = %reason, "applying a released aggregate was interrupted; the release is retried");
                    return settled;
                }
            }
        };
        let again = matches!(outcome, Unpark::HeldAgain { .. });
        let replayed = (message.clone(), outcome.clone());
        if let Err(err) = holds.store().unpark(message, outcome).await {
            tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&*err), "settling a parked message; the release is retried");
            return settled;
        }
        settled.push(replayed);
        if again {
            tracing::error!(
                consumer = %shared.consumer, aggregate_type = %hold.aggregate_type,
                aggregate_id = %hold.aggregate_id, applied,
                "a released aggregate failed again: it is held behind the message that failed"
            );
            return settled;
        }
        applied += 1;
    }
    holds.forget(&key);
    tracing::info!(
        consumer = %shared.consumer, aggregate_type = %hold.aggregate_type,
        aggregate_id = %hold.aggregate_id, applied, release = release.as_str(),
        "released aggregate goes on"
    );
    settled
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
        if shared.pause.is_paused() {
            continue; // the store is away; the pause's probe watches it
        }
        if let Err(err) = apply_releases(&shared, &holds, &stop).await {
            tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&*err), "reading held aggregates");
        }
    }
}

/// Reads the holds once and applies the released ones (one tick of
/// [`watch`]); returns the parked messages it settled.
pub(crate) async fn apply_releases(
    shared: &Arc<Shared>,
    holds: &Holds,
    stop: &CancellationToken,
) -> Result<Vec<Replayed>, BoxError> {
    let listed = holds.refresh(&shared.consumer).await?;
    let released: Vec<(Hold, Release)> = listed
        .into_iter()
        .filter_map(|hold| hold.release.map(|release| (hold, release)))
        .collect();
    let mut settled = Vec::new();
    // Aggregates are independent: a few are replayed at once (each in its
    // own order), under one hold of the held set's lock per few, which
    // lets parks and holds in between.
    for few in released.chunks(shared.max_in_flight.clamp(1, REPLAYED_AT_ONCE)) {
        let _change = holds.changing().await;
        let replays = few
            .iter()
            .map(|(hold, release)| replay(holds, shared, hold, *release, stop));
        for replayed in futures::future::join_all(replays).await {
            settled.extend(replayed);
        }
    }
    Ok(settled)
}

/// Why a parked message was not applied.
enum Failure {
    /// Its handler failed, or it cannot be handled: it holds its aggregate
    /// again.
    Handler(String),
    /// Not its fault (the database away, a conflict): tried again later.
    Interrupted(String),
}

/// Runs a parked message through its handler; why when it failed.
async fn apply(shared: &Arc<Shared>, message: &ParkedMessage) -> Result<(), Failure> {
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
    match dispatch::decide_delivered(shared, &delivered, &span)
        .await
        .decision
    {
        Decision::Ack { .. } => Ok(()),
        Decision::Retry { reason, .. } => Err(Failure::Handler(reason)),
        Decision::Dead { kind, reason } => Err(Failure::Handler(format!("{kind}: {reason}"))),
        Decision::Wait { reason, .. } => Err(Failure::Interrupted(reason)),
    }
}
