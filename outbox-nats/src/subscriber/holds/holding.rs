//! What a message's verdict does to held aggregates (with
//! [`keep_order`](crate::subscriber::SubscriberBuilder::keep_order), see
//! [`hold`](super::hold)): a message of a held aggregate is parked behind
//! the hold instead of being handled, and a message that goes to the dead
//! letters because it could not be applied holds its aggregate behind it.
//! Independent of JetStream: the lane workers and the in-process harness
//! run the same steps, and settle the verdicts each their own way.

use txoutbox_core::consumer::ParkedMessage;
use txoutbox_core::{MessageId, wire};

use crate::subscriber::health::UNKNOWN_EVENT;
use crate::subscriber::lanes::LaneKey;
use crate::subscriber::lanes::{Acked, Decision, Delivered, Verdict, header};
use crate::subscriber::setup::Shared;

/// A message of a held aggregate is parked behind the message it is held
/// behind instead of being handled: the verdict to settle it with (acked
/// once parked, or delivered again later when the store cannot park it).
/// `None` when its aggregate is not held (or the subscriber keeps no order).
pub(crate) async fn park_if_held(
    shared: &Shared,
    delivered: &Delivered<'_>,
    key: &LaneKey,
) -> Option<Verdict> {
    let holds = shared.holds.as_ref()?;
    if !holds.is_held(key) {
        return None;
    }
    let message = parked(delivered, None)?;
    let decision = match holds.park_if_held(message, key).await {
        Ok(false) => return None,
        Ok(true) => Decision::Ack {
            outcome: Acked::Held,
        },
        Err(err) => {
            let reason = format!(
                "its aggregate is held and it cannot be parked: {}",
                txoutbox_core::ErrorChain(&*err)
            );
            match shared.cause_of_error(&*err) {
                cause if cause.spends_no_delivery() => Decision::Wait { cause, reason },
                _ => Decision::Retry {
                    delay: shared.backoff.jittered_delay(delivered.deliveries),
                    reason,
                },
            }
        }
    };
    Some(Verdict {
        decision,
        event: UNKNOWN_EVENT,
    })
}

/// A message dead for a reason that holds its aggregate
/// ([`DeadLetterKind::holds_aggregate`](crate::subscriber::DeadLetterKind::holds_aggregate))
/// is parked with its reason and its aggregate held behind it, before the
/// message is settled. Returns whether it held the aggregate (a subscriber
/// that keeps order, a message that names its aggregate), or why the hold
/// could not be recorded: then the message must not be settled (later
/// messages of its aggregate would pass it); it waits, unsettled, for the
/// store to answer.
pub(crate) async fn hold_if_dead(
    shared: &Shared,
    verdict: &Verdict,
    delivered: &Delivered<'_>,
    key: &LaneKey,
) -> Result<bool, String> {
    if let (Decision::Dead { kind, reason }, Some(holds)) = (&verdict.decision, &shared.holds)
        && kind.holds_aggregate()
        && let Some(message) = parked(delivered, Some(format!("{kind}: {reason}")))
    {
        holds
            .hold_behind(&shared.consumer, message, key, reason)
            .await
            .map_err(|err| {
                format!(
                    "the hold behind a dead message cannot be recorded: {}",
                    txoutbox_core::ErrorChain(&*err)
                )
            })?;
        return Ok(true);
    }
    Ok(false)
}

/// `delivered` as a message to park, if its headers name its aggregate and
/// id (a message that does not cannot be held: it is dead-lettered as
/// before).
pub(crate) fn parked(delivered: &Delivered<'_>, reason: Option<String>) -> Option<ParkedMessage> {
    let pairs = &delivered.headers;
    let id = header(pairs, wire::ID)?.parse::<MessageId>().ok()?;
    let aggregate_type = header(pairs, wire::AGGREGATE_TYPE)?;
    let aggregate_id = header(pairs, wire::SUBJECT)?;
    Some(ParkedMessage::new(
        id,
        aggregate_type,
        aggregate_id,
        delivered.stream_sequence,
        delivered.subject,
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect(),
        delivered.payload.to_vec(),
        reason,
    ))
}
