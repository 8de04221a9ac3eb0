//! After a restart: the messages delivered before this process started and
//! not acknowledged (a crashed process held them) would come back only
//! after their ack wait, while later messages of their aggregates arrive at
//! once. With [`keep_order`](crate::subscriber::SubscriberBuilder::keep_order),
//! the subscriber reads them first and marks those not applied as away in
//! their lanes, so what follows them waits for them; and it hands them
//! back ([`hand_back_outstanding`]): JetStream redelivers them at once instead of after
//! the ack wait, so a crash costs the time of a restart, not the ack wait,
//! and the dead process's messages do not fill `max_ack_pending` meanwhile.
//! It reads from the consumer's ack floor until it has found as many
//! messages not applied as the consumer has outstanding, up to the last
//! delivery: however far past the floor one slow message (kept alive by
//! progress acks) or a stream shared with other subjects put the newest
//! ones (see [`expect_after`]; other subjects' messages cost no read, see
//! `delivered_reads`).
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
use async_nats::jetstream::message::StreamMessage;
use tokio::time::Instant;
use txoutbox_core::{MessageId, wire};

use super::delivered_reads::{self, Subjects};
use crate::subscriber::lanes::{LaneKey, Lanes, lane_key};
use crate::subscriber::lanes::{header, header_pairs_of};
use crate::subscriber::setup::Shared;

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

/// Stream sequences past the floor read before what was read so far is
/// looked up in the inbox and checked against what is outstanding.
const ROUND: u64 = 20_000;

/// The most messages of the consumer's read past the floor: past them,
/// the guard stops and says so (see [`expect_after`]).
const READ_MOST: usize = 200_000;

/// Marks the messages delivered past both the consumer's ack floor and
/// `after`, not applied, as away in `lanes`; hands back those of them
/// `back` covers (see [`hand_back_outstanding`]).
///
/// Reads from the floor up to the consumer's last delivery, round by round
/// ([`ROUND`] stream sequences each), until it has found as many messages
/// not applied as the consumer has outstanding (`num_ack_pending`): one
/// slow message kept alive by progress acks, or a stream shared with other
/// subjects, may put the newest outstanding messages any number of stream
/// sequences past the floor. Past [`READ_MOST`] messages of the
/// consumer's it stops, and warns with the numbers: the messages past that
/// point come back after their ack wait, and later messages of their
/// aggregates may run before them.
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
    let subjects = Subjects::of(&info.config);
    // Every outstanding message of this consumer `back` covers, whatever
    // becomes of it here: all of them are handed back.
    let mut outstanding: Vec<u64> = Vec::new();
    let (mut expected, mut read, mut from) = (0, 0, floor + 1);
    while from <= delivered {
        let to = delivered.min(from.saturating_add(ROUND - 1));
        let messages = delivered_reads::read(&stream, &subjects, from..=to)
            .await
            .map_err(Unreadable::Messages)?;
        read += messages.len();
        let mut candidates: HashMap<MessageId, (u64, LaneKey)> = HashMap::new();
        for message in &messages {
            if back.covers(message.sequence) {
                outstanding.push(message.sequence);
            }
            if let Some((id, key)) = candidate(shared, message) {
                candidates.insert(id, (message.sequence, key));
            }
        }
        if !candidates.is_empty() {
            let done = applied
                .applied(candidates.keys().copied().collect())
                .await
                .map_err(Unreadable::Applied)?;
            for (id, (sequence, key)) in candidates {
                if !done.contains(&id) {
                    lanes.expect(&key, sequence);
                    expected += 1;
                }
            }
        }
        from = to + 1;
        // Each one not applied is outstanding: once as many are found as
        // the consumer has, none is left past here.
        if expected >= info.num_ack_pending {
            break;
        }
        if read >= READ_MOST && from <= delivered {
            tracing::warn!(
                consumer = %shared.consumer, floor, read_to = to, last_delivered = delivered,
                outstanding = info.num_ack_pending, found = expected, read,
                "stopped reading what was delivered and not acknowledged: the messages \
                 delivered past the stream sequence read to come back after their ack wait, \
                 and later messages of their aggregates may run before them"
            );
            break;
        }
    }
    if expected > 0 {
        tracing::info!(
            consumer = %shared.consumer, outstanding = expected, after, floor,
            read_to = (from - 1).min(delivered), read,
            "messages delivered and not received or applied by this process: later messages \
             of their aggregates wait for them (at most the ack wait and 1 s)"
        );
    }
    hand_back_outstanding(shared, &info, outstanding).await;
    Ok(())
}

/// The id and lane of `message` if its aggregate's later messages must
/// wait for it: it has an envelope, a handler, and its aggregate is not
/// held (a held one's messages are parked, acked, or to be parked).
fn candidate(shared: &Shared, message: &StreamMessage) -> Option<(MessageId, LaneKey)> {
    let pairs = header_pairs_of(&message.headers);
    let (Some(id), Some(event), Some(aggregate_type), Some(aggregate_id)) = (
        header(&pairs, wire::ID).and_then(|id| id.parse::<MessageId>().ok()),
        header(&pairs, wire::TYPE),
        header(&pairs, wire::AGGREGATE_TYPE),
        header(&pairs, wire::SUBJECT),
    ) else {
        return None;
    };
    shared.handlers.get(event)?;
    let key = lane_key(aggregate_type, aggregate_id);
    let held = shared
        .holds
        .as_ref()
        .is_some_and(|holds| holds.is_held(&key));
    (!held).then_some((id, key))
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
