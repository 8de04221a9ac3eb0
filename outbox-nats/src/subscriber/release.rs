//! Applying a released hold (see [`hold`](super::hold)): every
//! [`RELEASE_POLL`] the subscriber reads which aggregates are held and
//! released, and applies what is parked behind a released one, in order,
//! through the same handlers.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use txoutbox_core::consumer::{Hold, ParkedMessage, Release, Unpark};
use txoutbox_core::{MessageId, wire};

use super::dispatch::{self, Decision, Delivered, Incoming, header, header_pairs};
use super::hold::Holds;
use super::ordering::lane_key;
use super::shared::Shared;

/// How often the subscriber reads which aggregates are held and released.
pub(crate) const RELEASE_POLL: Duration = Duration::from_secs(1);

/// Applies what is parked behind a released hold, in order, and lets
/// the aggregate go on; should a message fail, the aggregate is held
/// behind it again.
async fn replay(
    holds: &Holds,
    shared: &Arc<Shared>,
    hold: &Hold,
    release: Release,
    stop: &CancellationToken,
) {
    let key = lane_key(&hold.aggregate_type, &hold.aggregate_id);
    let _change = holds.changing().await;
    let parked = match holds
        .store()
        .parked(hold.aggregate_type.clone(), hold.aggregate_id.clone())
        .await
    {
        Ok(parked) => parked,
        Err(err) => {
            tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&*err), "reading parked messages; the release is retried");
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
        if let Err(err) = holds.store().unpark(message, outcome).await {
            tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&*err), "settling a parked message; the release is retried");
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
    holds.forget(&key);
    tracing::info!(
        consumer = %shared.consumer, aggregate_type = %hold.aggregate_type,
        aggregate_id = %hold.aggregate_id, applied, release = release.as_str(),
        "released aggregate goes on"
    );
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
                tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&*err), "reading held aggregates");
                continue;
            }
        };
        for hold in listed {
            if let Some(release) = hold.release {
                replay(&holds, &shared, &hold, release, &stop).await;
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
pub(crate) fn parked(incoming: &Incoming, reason: Option<String>) -> Option<ParkedMessage> {
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
