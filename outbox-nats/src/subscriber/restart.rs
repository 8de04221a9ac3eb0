//! After a restart: the messages delivered before this process started and
//! not acknowledged (a crashed process held them) would come back only
//! after their ack wait, while later messages of their aggregates arrive at
//! once. With [`keep_order`](super::SubscriberBuilder::keep_order),
//! the subscriber reads them first and marks those not applied as away in
//! their lanes, so what follows them waits for them; and it hands them
//! back ([`hand_back_outstanding`]): JetStream redelivers them at once instead of after
//! the ack wait, so a crash costs the time of a restart, not the ack wait,
//! and the dead process's messages do not fill `max_ack_pending` meanwhile.
//!
//! After a reconnect the same holds for messages the server delivered while
//! the connection was going down and this process never received (lost in
//! transit): they come back after their ack wait, behind later ones. The
//! subscriber then marks every delivered message past the last one it
//! received, and not applied, as away ([`expect_lost_in_transit`]).
//!
//! With failover, a process newly pinned does both ([`expect_taken_over`]):
//! what the previous pinned process held and did not acknowledge is marked
//! away and handed back, as at a start, since the server may pin this
//! process with new messages while the previous one's are still pending
//! (its window was not full, so no process found the durable unpinned with
//! messages pending to hand them back: see `handover`); left to their ack
//! wait, they would hold up their aggregates' new messages here that long.

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::consumer::{self, PullConsumer};
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use futures::StreamExt;
use tokio::time::Instant;
use txoutbox_core::{MessageId, wire};

use super::builder::subject_matches;
use super::dispatch::{header, header_pairs_of};
use super::hand_back::MOST;
use super::ordering::{LaneKey, Lanes, lane_key};
use super::shared::Shared;

/// Reads of earlier deliveries in flight at once.
const READS_IN_FLIGHT: usize = 32;

/// Marks what was outstanding before this process started as away in
/// `lanes` and hands it back (see the module docs). The server may be slow
/// to answer (a busy or restarting server): asks again every 250 ms for up
/// to `patience`, then logs that order across the restart is not kept
/// (order then holds per process only, and what the gone process held comes
/// back after its ack wait).
pub(crate) async fn expect_outstanding<T>(
    shared: &Shared,
    consumer: &PullConsumer,
    lanes: &Lanes<T>,
    patience: Duration,
) {
    let gave_up = "cannot read what a previous process held; order across the restart is not \
                   kept, and its messages come back after their ack wait";
    patiently(patience, gave_up, shared, || {
        expect_after(shared, consumer, lanes, 0, HandBack::Yes)
    })
    .await;
}

/// After a reconnect: marks the messages delivered past `received` (the
/// highest stream sequence this process received) and not applied as away
/// in `lanes`. The server may not answer right after the reconnect (a
/// restarted server recovers its streams first): asks again every 250 ms
/// for up to `patience`, then logs that order across the reconnect is not
/// kept.
pub(crate) async fn expect_lost_in_transit<T>(
    shared: &Shared,
    consumer: &PullConsumer,
    lanes: &Lanes<T>,
    received: u64,
    patience: Duration,
) {
    let gave_up =
        "cannot tell what was lost in transit at the reconnect; order across it is not kept";
    patiently(patience, gave_up, shared, || {
        expect_after(shared, consumer, lanes, received, HandBack::No)
    })
    .await;
}

/// At a takeover (failover: this process newly pinned, `first` the stream
/// sequence of the first message with its new pin): marks the messages
/// delivered past `received` (the highest stream sequence this process
/// received) and not applied as away in `lanes`, and hands back those
/// delivered before `first`: the previous pinned process held them (those
/// after it are on their way to this process). Asks again every 250 ms for
/// up to `patience`, as [`expect_lost_in_transit`] does.
pub(crate) async fn expect_taken_over<T>(
    shared: &Shared,
    consumer: &PullConsumer,
    lanes: &Lanes<T>,
    received: u64,
    first: u64,
    patience: Duration,
) {
    let gave_up = "cannot read what the previous pinned process held; order across the takeover \
                   is not kept, and its messages come back after their ack wait";
    patiently(patience, gave_up, shared, || {
        expect_after(shared, consumer, lanes, received, HandBack::Before(first))
    })
    .await;
}

/// Runs `attempt` until it succeeds, again every [`RETRY`] for up to
/// `patience`; then logs `gave_up` with the last error.
async fn patiently<F, Fut>(patience: Duration, gave_up: &str, shared: &Shared, mut attempt: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), Unreadable>>,
{
    let deadline = Instant::now() + patience;
    loop {
        match attempt().await {
            Ok(()) => return,
            Err(err) if Instant::now() >= deadline => {
                tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&err), "{gave_up}");
                return;
            }
            Err(err) => {
                tracing::debug!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&err), "reading what is outstanding failed; asking again");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// How often [`expect_outstanding`] and [`expect_lost_in_transit`] ask again.
const RETRY: Duration = Duration::from_millis(250);

/// What could not be read to find the outstanding messages.
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    #[error("cannot read the consumer's state")]
    Consumer(#[source] async_nats::jetstream::context::ConsumerInfoError),
    #[error("cannot read the stream")]
    Stream(#[source] async_nats::jetstream::context::GetStreamError),
    #[error("cannot read the messages delivered and not acknowledged")]
    Messages(#[source] async_nats::jetstream::stream::LastRawMessageError),
    #[error("cannot read what the inbox applied")]
    Applied(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Which of the outstanding messages found are handed back to the server
/// for an immediate redelivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HandBack {
    /// At a start, every one: a process that is gone held them.
    Yes,
    /// At a takeover, those before this stream sequence (the first message
    /// with the new pin): the previous pinned process held them; those
    /// after it are on their way to this process.
    Before(u64),
    /// After a reconnect, none: they may still be on their way to this
    /// process.
    No,
}

impl HandBack {
    /// Whether the outstanding message `sequence` is handed back.
    fn covers(self, sequence: u64) -> bool {
        match self {
            Self::Yes => true,
            Self::Before(first) => sequence < first,
            Self::No => false,
        }
    }
}

/// Marks the messages delivered past both the consumer's ack floor and
/// `after`, not applied, as away in `lanes`; hands back those of them
/// `back` covers (see [`hand_back_outstanding`]).
async fn expect_after<T>(
    shared: &Shared,
    consumer: &PullConsumer,
    lanes: &Lanes<T>,
    after: u64,
    back: HandBack,
) -> Result<(), Unreadable> {
    let Some(applied) = &shared.applied else {
        return Ok(());
    };
    let info = consumer.get_info().await.map_err(Unreadable::Consumer)?;
    let (floor, delivered) = (
        info.ack_floor.stream_sequence.max(after),
        info.delivered.stream_sequence,
    );
    if info.num_ack_pending == 0 || delivered <= floor {
        return Ok(());
    }
    let stream = shared
        .context
        .get_stream(shared.stream.as_ref())
        .await
        .map_err(Unreadable::Stream)?;
    let filter = info.config.filter_subject.clone();
    // One request per sequence (nats-server 2.9 has no batch get), many in
    // flight at once.
    let last = delivered.min(floor + MOST);
    let mut messages = futures::stream::iter((floor + 1)..=last)
        .map(|sequence| stream.get_raw_message(sequence))
        .buffer_unordered(READS_IN_FLIGHT);
    let mut candidates: HashMap<MessageId, (u64, LaneKey)> = HashMap::new();
    // Every outstanding message of this consumer `back` covers, whatever
    // becomes of it here: all of them are handed back.
    let mut outstanding: Vec<u64> = Vec::new();
    while let Some(read) = messages.next().await {
        let message = match read {
            Ok(message) => message,
            // Gone from the stream (deleted, aged out): nothing to wait for.
            Err(err) if err.kind() == LastRawMessageErrorKind::NoMessageFound => continue,
            Err(err) => return Err(Unreadable::Messages(err)),
        };
        if !filter.is_empty() && !subject_matches(&filter, &message.subject) {
            continue; // never delivered to this consumer
        }
        if back.covers(message.sequence) {
            outstanding.push(message.sequence);
        }
        let pairs = header_pairs_of(&message.headers);
        let (Some(id), Some(event), Some(aggregate_type), Some(aggregate_id)) = (
            header(&pairs, wire::ID).and_then(|id| id.parse::<MessageId>().ok()),
            header(&pairs, wire::TYPE),
            header(&pairs, wire::AGGREGATE_TYPE),
            header(&pairs, wire::SUBJECT),
        ) else {
            continue;
        };
        if shared.handlers.get(event).is_none() {
            continue; // no handler: nothing to keep in order
        }
        let key = lane_key(aggregate_type, aggregate_id);
        if shared
            .holds
            .as_ref()
            .is_some_and(|holds| holds.is_held(&key))
        {
            continue; // parked (acked) or to be parked: nothing to wait for
        }
        candidates.insert(id, (message.sequence, key));
    }
    if candidates.is_empty() {
        hand_back_outstanding(shared, &info, outstanding).await;
        return Ok(());
    }
    let done = applied
        .applied(candidates.keys().copied().collect())
        .await
        .map_err(Unreadable::Applied)?;
    let mut expected = 0;
    for (id, (sequence, key)) in candidates {
        if !done.contains(&id) {
            lanes.expect(&key, sequence);
            expected += 1;
        }
    }
    if expected > 0 {
        tracing::info!(
            consumer = %shared.consumer, outstanding = expected, after,
            "messages delivered and not received or applied by this process: later messages \
             of their aggregates wait for them (at most the ack wait and 1 s)"
        );
    }
    hand_back_outstanding(shared, &info, outstanding).await;
    Ok(())
}

/// Asks JetStream to redeliver at once the messages `sequences` (stream
/// sequences) that a process which is gone received and did not
/// acknowledge, instead of after their ack wait, in stream order (see
/// [`hand_back`](super::hand_back)). A message a live process still holds
/// (one cut off from the server) is redelivered here too: the inbox makes
/// its second handling a duplicate.
async fn hand_back_outstanding(shared: &Shared, info: &consumer::Info, mut sequences: Vec<u64>) {
    if sequences.is_empty() {
        return;
    }
    sequences.sort_unstable();
    let count = sequences.len();
    match super::hand_back::hand_back(shared, info, sequences).await {
        Ok(()) => tracing::info!(
            consumer = %shared.consumer, handed_back = count,
            "messages a previous process received and did not acknowledge: handed back for \
             redelivery now rather than after the ack wait"
        ),
        Err(err) => tracing::warn!(
            consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&*err),
            "cannot hand back what a previous process held; it comes back after its ack wait"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::HandBack;

    #[test]
    fn what_is_handed_back() {
        assert!(HandBack::Yes.covers(1) && HandBack::Yes.covers(u64::MAX));
        assert!(!HandBack::No.covers(1));
        // A takeover: the previous pinned process's deliveries, before the
        // first message with the new pin, not that one and those after it.
        let takeover = HandBack::Before(1481);
        assert!(takeover.covers(102) && takeover.covers(1480));
        assert!(!takeover.covers(1481) && !takeover.covers(1500));
    }
}
