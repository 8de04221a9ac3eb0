//! After a restart: the messages delivered before this process started and
//! not acknowledged (a crashed process held them) come back only after
//! their ack wait, while later messages of their aggregates arrive at once.
//! With [`keep_order`](super::SubscriberBuilder::keep_order),
//! the subscriber reads them first and marks those not applied as away in
//! their lanes, so what follows them waits for them.

use std::collections::HashMap;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use futures::StreamExt;
use outbox_core::{MessageId, wire};

use super::builder::subject_matches;
use super::dispatch::{header, header_pairs_of};
use super::ordering::{LaneKey, Lanes, lane_key};
use super::shared::Shared;

/// The most earlier deliveries read at a start (the consumer's window is
/// usually far smaller).
const MOST: u64 = 20_000;
/// Reads of earlier deliveries in flight at once.
const READS_IN_FLIGHT: usize = 32;

/// Marks what was outstanding before this process started as away in
/// `lanes` (see the module docs). Failing reads are logged: order then holds
/// per process only, as without the setting.
pub(crate) async fn expect_outstanding<T>(
    shared: &Shared,
    consumer: &PullConsumer,
    lanes: &Lanes<T>,
) {
    let Some(applied) = &shared.applied else {
        return;
    };
    let info = match consumer.get_info().await {
        Ok(info) => info,
        Err(err) => {
            tracing::warn!(consumer = %shared.consumer, error = %outbox_core::ErrorChain(&err), "cannot read the consumer's state; order across the restart is not kept");
            return;
        }
    };
    let (floor, delivered) = (
        info.ack_floor.stream_sequence,
        info.delivered.stream_sequence,
    );
    if info.num_ack_pending == 0 || delivered <= floor {
        return;
    }
    let stream = match shared.context.get_stream(shared.stream.as_ref()).await {
        Ok(stream) => stream,
        Err(err) => {
            tracing::warn!(consumer = %shared.consumer, error = %outbox_core::ErrorChain(&err), "cannot read the stream; order across the restart is not kept");
            return;
        }
    };
    let filter = info.config.filter_subject.clone();
    // One request per sequence (nats-server 2.9 has no batch get), many in
    // flight at once.
    let last = delivered.min(floor + MOST);
    let mut messages = futures::stream::iter((floor + 1)..=last)
        .map(|sequence| stream.get_raw_message(sequence))
        .buffer_unordered(READS_IN_FLIGHT);
    let mut candidates: HashMap<MessageId, (u64, LaneKey)> = HashMap::new();
    while let Some(read) = messages.next().await {
        let message = match read {
            Ok(message) => message,
            // Gone from the stream (deleted, aged out): nothing to wait for.
            Err(err) if err.kind() == LastRawMessageErrorKind::NoMessageFound => continue,
            Err(err) => {
                tracing::warn!(consumer = %shared.consumer, error = %outbox_core::ErrorChain(&err), "cannot read the messages delivered before this process started; order across the restart is not kept");
                return;
            }
        };
        if !filter.is_empty() && !subject_matches(&filter, &message.subject) {
            continue; // never delivered to this consumer
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
        return;
    }
    let done = match applied.applied(candidates.keys().copied().collect()).await {
        Ok(done) => done,
        Err(err) => {
            tracing::warn!(consumer = %shared.consumer, error = %outbox_core::ErrorChain(&*err), "cannot read what was applied; order across the restart is not kept");
            return;
        }
    };
    let mut expected = 0;
    for (id, (sequence, key)) in candidates {
        if !done.contains(&id) {
            lanes.expect(&key, sequence);
            expected += 1;
        }
    }
    if expected > 0 {
        tracing::info!(
            consumer = %shared.consumer, outstanding = expected,
            "messages delivered before this process started are not applied yet: later messages \
             of their aggregates wait for them (at most the ack wait and 1 s)"
        );
    }
}
