//! The subscriber's main loop: pull messages, put each into its
//! aggregate's lane at once, keep every waiting message alive, and shut
//! down in order.
//!
//! The loop never stops reading to wait for a handler slot: a message the
//! client received but did not take would get no progress ack and be
//! redelivered after its ack wait (then handled twice), and a message
//! coming back from a retry could be stuck behind it long enough for its
//! aggregate to go on without it. What the subscriber holds is instead
//! bounded by the consumer's `max_ack_pending`, which the server enforces.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::consumer::pull::{MessagesErrorKind, Stream};
use async_nats::jetstream::consumer::{PullConsumer, StreamError};
use futures::{FutureExt, StreamExt};
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use txoutbox_core::backoff::Doubling;

use super::dispatch::{Incoming, header_pairs};
use super::ordering::{Admission, Held, LaneKey, Lanes, Overdue, Queued, lane_of};
use super::overdue;
use super::settle;
use super::stalled_pulls;
use super::worker::{Stop, run_lane};
use crate::subscriber::config::SubscriberError;
use crate::subscriber::groups::grouping;
use crate::subscriber::health::UNKNOWN_EVENT;
use crate::subscriber::holds::release;
use crate::subscriber::setup::Shared;
use crate::subscriber::takeover::failover;
use crate::subscriber::takeover::guard_pulls;
use crate::subscriber::takeover::orphans;
use crate::subscriber::takeover::restart;

/// How long one pull request waits for messages.
const PULL_EXPIRES: Duration = Duration::from_secs(30);
/// How often an idle pull request hears from the server.
const PULL_HEARTBEAT: Duration = Duration::from_secs(10);
/// Longest wait before reopening a failed message stream.
const MAX_REOPEN_DELAY: Duration = Duration::from_secs(10);
/// How often lanes left with only forgotten messages away are dropped.
const LANE_SWEEP_INTERVAL: Duration = Duration::from_secs(10);
/// How long the first message after a reconnect waits, at most, while the
/// subscriber finds out what the reconnect lost in transit (the server is
/// delivering again, so it normally answers at once).
const LOST_IN_TRANSIT_PATIENCE: Duration = Duration::from_secs(5);

/// How long a start keeps asking for what a previous process held before
/// it gives up keeping order across the restart (see
/// `restart::expect_outstanding`): no message is pulled meanwhile.
const OUTSTANDING_PATIENCE: Duration = Duration::from_secs(10);

/// How long abandoned handlers get to hand their messages back.
const HARD_STOP_GRACE: Duration = Duration::from_secs(5);

/// Runs until `shutdown` is cancelled (then drains) or the consumer is
/// deleted. `watch_holds`: this loop also applies released holds (one loop
/// of a subscriber does).
pub(crate) async fn run(
    shared: Arc<Shared>,
    consumer: PullConsumer,
    shutdown: CancellationToken,
    watch_holds: bool,
) -> Result<(), SubscriberError> {
    // One reader (failover, or the reader lease): a message away cannot
    // have gone to another process, so a late one is waited for until the
    // server says it is settled or gone (see `overdue`).
    let one_reader = shared.failover.is_some() || shared.gate.is_leased();
    let overdue_policy = if one_reader {
        Overdue::Ask {
            recheck: overdue::RECHECK,
        }
    } else {
        Overdue::GoOn
    };
    let lanes = Lanes::<Incoming>::new(shared.away_grace(), overdue_policy);
    let stop = Stop::default();
    let mut workers = JoinSet::new();
    // With inbox groups, one task drives every lane; without, each lane
    // has a worker task of its own.
    let starts = match &shared.inbox_groups {
        Some((inbox, settings)) => {
            let (ready, incoming) = grouping::ready_lanes();
            workers.spawn(grouping::run(
                Arc::clone(&shared),
                lanes.clone(),
                Arc::clone(inbox),
                *settings,
                ready.clone(),
                incoming,
                stop.clone(),
            ));
            LaneStarts::Grouped(ready)
        }
        None => LaneStarts::Worker,
    };
    if let Some(holds) = &shared.holds {
        // Before the first message: one of a held aggregate must be parked.
        if let Err(err) = holds.refresh(&shared.consumer).await {
            tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&*err), "cannot read held aggregates yet; retrying every second");
        }
        if watch_holds {
            workers.spawn(release::watch(
                Arc::clone(&shared),
                Arc::clone(holds),
                stop.draining.clone(),
            ));
        }
    }
    // With failover, a process starting beside the pinned one must not take
    // its messages for a crashed one's: the guard runs when this process is
    // pinned (at its first message with a new pin id), not at start. Under
    // the reader lease, this process is the durable's one reader from now
    // on, pinned or not: the guard runs at the start of each session.
    let leased = shared.gate.is_leased();
    if shared.failover.is_none() || leased {
        restart::expect_outstanding(&shared, &consumer, &lanes, OUTSTANDING_PATIENCE).await;
    }
    // With failover: hand back what a pinned process that is gone held
    // (under the lease, its successor's restart guard does).
    let mut orphan_checks = shared.failover.filter(|_| !leased).map(|pinned_ttl| {
        let mut every = tokio::time::interval(failover::pull_expiry(pinned_ttl));
        every.set_missed_tick_behavior(MissedTickBehavior::Delay);
        every
    });
    let mut sweep = tokio::time::interval(LANE_SWEEP_INTERVAL);
    let mut overdue_checks = one_reader.then(|| {
        let mut every = tokio::time::interval(overdue::RECHECK);
        every.set_missed_tick_behavior(MissedTickBehavior::Delay);
        every
    });
    let mut asking = overdue::Asking::default();
    let period = shared.progress_interval();
    let mut progress = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    progress.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut messages: Option<Stream> = None;
    let mut reopen = Doubling::new(Duration::from_millis(100), MAX_REOPEN_DELAY);
    // What a reconnect may have lost in transit is found before the first
    // message after it is admitted (see `restart::expect_lost_in_transit`).
    let client = shared.context.client();
    let mut connects_seen = connects(&client);
    let mut pull_failed = false;
    // This process dropped its own message stream (the lease ran out, or
    // the stream stalled): what the server delivered to it after that is
    // lost, and is handed back before the first message of the next one.
    let mut dropped_own = false;
    let mut received: u64 = 0;
    // Whether the stream stalled, looked at while it brings nothing (see
    // `stalled_pulls`).
    let mut silence = stalled_pulls::Silence::new();
    let mut looks = tokio::time::interval(stalled_pulls::SILENCE / 2);
    looks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let pull = consumer.cached_info().name.clone();
    tracing::info!(consumer = %shared.consumer, %pull, stream = %shared.stream, "subscriber started");
    let result = loop {
        let Some(stream) = messages.as_mut() else {
            if !shared.gate.holds() {
                // The lease ran out by this process's clock (the database
                // is away): pull nothing, keep what is held alive, until it
                // is renewed or lost.
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => break Ok(()),
                    _ = progress.tick() => keep_alive(&shared, &lanes).await,
                    _ = sweep.tick() => lanes.sweep(),
                    () = shared.gate.held() => pull_failed = true,
                }
                continue;
            }
            match open(&consumer, &shared).await {
                Ok(stream) => {
                    messages = Some(stream);
                    reopen.reset();
                }
                Err(err) => {
                    let pause = reopen.next_pause();
                    tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&err), retry_in = ?pause, "cannot pull messages");
                    tokio::select! {
                        () = shutdown.cancelled() => break Ok(()),
                        () = tokio::time::sleep(pause) => {}
                    }
                }
            }
            continue;
        };
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break Ok(()),
            _ = sweep.tick() => lanes.sweep(),
            _ = progress.tick() => keep_alive(&shared, &lanes).await,
            () = tick(&mut orphan_checks) => orphans::hand_back_orphans(&shared, &consumer).await,
            () = tick(&mut overdue_checks) => asking.start(&shared, &consumer, &lanes),
            _ = looks.tick() => {
                if silence.stalled(&shared, &consumer).await
                    && let Some(stream) = messages.take()
                {
                    hand_back_buffered(&shared, stream).await;
                    dropped_own = true;
                }
            }
            () = shared.gate.expired() => {
                tracing::warn!(consumer = %shared.consumer, "the reader lease ran out before it could be renewed: no handler starts and nothing is pulled until it is");
                if let Some(stream) = messages.take() {
                    hand_back_buffered(&shared, stream).await;
                    dropped_own = true;
                }
            }
            Some(joined) = workers.join_next(), if !workers.is_empty() => {
                if let Err(err) = joined {
                    tracing::error!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&err), "lane worker failed");
                }
            }
            next = stream.next() => match next {
                Some(Ok(message)) => {
                    silence.heard();
                    let connects_now = connects(&client);
                    let failed = std::mem::take(&mut pull_failed);
                    let pinned = shared.failover.is_some() && shared.pin().taken_over(&message);
                    if pinned {
                        tracing::info!(consumer = %shared.consumer, %pull, "pinned: this process receives the durable's messages now (failover)");
                    }
                    // Under the lease a new pin is no takeover: no other
                    // process read meanwhile (a leader change clears the pin).
                    // So is a new stream after this process dropped its own:
                    // what was delivered to the dropped one is handed back at
                    // once rather than waited for until its ack wait.
                    let took_over = (pinned && !leased) || std::mem::take(&mut dropped_own);
                    // A takeover is a restart for the messages the previous
                    // pinned process held: everything delivered past what this
                    // process received is waited for unless applied, and what
                    // was delivered before this message is handed back.
                    // The guard runs while the stream is still polled (its
                    // pulls renewed, the pin kept); what arrives meanwhile is
                    // admitted after it.
                    let mut arrived = guard_pulls::Arrived::default();
                    if connects_now != connects_seen || failed || took_over {
                        connects_seen = connects_now;
                        let patience = LOST_IN_TRANSIT_PATIENCE;
                        // The first message with the new pin: before it, the
                        // previous pinned process's deliveries.
                        let first = message.info().ok().map(|info| info.stream_sequence);
                        let guard = async {
                            match first.filter(|_| took_over) {
                                Some(first) => {
                                    restart::expect_taken_over(&shared, &consumer, &lanes, received, first, patience).await;
                                }
                                None => {
                                    restart::expect_lost_in_transit(&shared, &consumer, &lanes, received, patience).await;
                                }
                            }
                        };
                        arrived = guard_pulls::while_pulling(&shared, &lanes, stream, guard).await;
                    }
                    for message in std::iter::once(message).chain(arrived.messages) {
                        if let Some(sequence) = admit(&shared, &lanes, &stop, &mut workers, &starts, message).await {
                            received = received.max(sequence);
                        }
                    }
                    match arrived.stopped {
                        Some(Some(err)) if err.kind() == MessagesErrorKind::ConsumerDeleted => {
                            break Err(SubscriberError::ConsumerDeleted { consumer: pull.clone() });
                        }
                        Some(Some(err)) => {
                            tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&err), "pulling messages");
                            pull_failed = true;
                        }
                        Some(None) => {
                            tracing::warn!(consumer = %shared.consumer, "message stream ended; reopening it");
                            messages = None;
                        }
                        None => {}
                    }
                }
                Some(Err(err)) if err.kind() == MessagesErrorKind::ConsumerDeleted => {
                    break Err(SubscriberError::ConsumerDeleted { consumer: pull.clone() });
                }
                Some(Err(err)) => {
                    tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&err), "pulling messages");
                    pull_failed = true;
                }
                None => {
                    tracing::warn!(consumer = %shared.consumer, "message stream ended; reopening it");
                    messages = None;
                }
            },
        }
    };
    drain(&shared, &stop, &mut workers, messages).await;
    let ours = shared.pin().current().map(str::to_owned);
    if result.is_ok()
        && let Some(id) = ours
    {
        orphans::release_pin(&shared, &consumer, &id).await;
    }
    tracing::info!(consumer = %shared.consumer, %pull, "subscriber stopped");
    result
}

async fn open(consumer: &PullConsumer, shared: &Shared) -> Result<Stream, StreamError> {
    let pulls = consumer
        .stream()
        .max_messages_per_batch(shared.max_in_flight);
    match shared.failover {
        // Pulls of the durable's priority group, often enough to keep the pin.
        Some(pinned_ttl) => {
            pulls
                .group(failover::GROUP)
                .expires(failover::pull_expiry(pinned_ttl))
                .messages()
                .await
        }
        // Under the lease, pulls short enough that those of a process whose
        // lease ran out end soon after it stops pulling; without an idle
        // heartbeat (as with failover): the answer to each expired pull
        // shows the server alive, and a heartbeat late under load would
        // count as a failed pull.
        None if shared.gate.is_leased() => {
            let expires = shared
                .lease
                .as_ref()
                .map_or(PULL_EXPIRES, |lease| lease.duration / 2)
                .clamp(Duration::from_secs(1), PULL_EXPIRES);
            pulls.expires(expires).messages().await
        }
        None => {
            pulls
                .expires(PULL_EXPIRES)
                .heartbeat(PULL_HEARTBEAT)
                .messages()
                .await
        }
    }
}

/// The next tick of `interval`; never without one.
async fn tick(interval: &mut Option<tokio::time::Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// The client's connect count: it changes at every reconnect.
fn connects(client: &async_nats::Client) -> u64 {
    client
        .statistics()
        .connects
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// Puts `message` in its aggregate's lane, starting the lane's worker if
/// it has none; returns its stream sequence. A message whose JetStream
/// metadata cannot be read (so its stream sequence and delivery count are
/// unknown, and it cannot be put in order) is settled at once instead (see
/// [`settle::unreadable`]).
async fn admit(
    shared: &Arc<Shared>,
    lanes: &Lanes<Incoming>,
    stop: &Stop,
    workers: &mut JoinSet<()>,
    starts: &LaneStarts,
    message: jetstream::Message,
) -> Option<u64> {
    let (stream_sequence, deliveries) = match message.info() {
        Ok(info) => (
            info.stream_sequence,
            u64::try_from(info.delivered).unwrap_or(1).max(1),
        ),
        Err(err) => {
            settle::unreadable(shared, &message, &err.to_string()).await;
            return None;
        }
    };
    let key = aggregate_of(&message, stream_sequence);
    let queued = Queued {
        item: Incoming {
            message,
            deliveries,
            stream_sequence,
        },
        sequence: stream_sequence,
        held: Some(Held::new(&shared.held)),
    };
    if lanes.admit(&key, queued) == Admission::Start {
        match starts {
            LaneStarts::Worker => {
                workers.spawn(run_lane(
                    Arc::clone(shared),
                    lanes.clone(),
                    key,
                    stop.clone(),
                ));
            }
            LaneStarts::Grouped(ready) => {
                // The groups' task runs until the loop drains, after this.
                let _ = ready.send(key);
            }
        }
    }
    shared.report_in_flight();
    Some(stream_sequence)
}

/// Who drives a lane that has a message and no worker.
enum LaneStarts {
    /// A worker task of its own.
    Worker,
    /// The inbox groups' task, told on this channel.
    Grouped(grouping::Ready),
}

/// Sends a progress ack (`+WPI`) for every message waiting in a lane (for
/// a handler slot, or behind an earlier message of its aggregate), so none
/// reaches its ack wait while it waits. Running messages are kept alive by
/// their workers.
async fn keep_alive(shared: &Shared, lanes: &Lanes<Incoming>) {
    for reply in lanes.waiting(|waiting| waiting.message.reply.clone()) {
        settle::progress(shared, reply).await;
    }
}

/// The lane of the message's aggregate; a message without one (it will be
/// dead-lettered) gets a lane of its own.
fn aggregate_of(message: &jetstream::Message, stream_sequence: u64) -> LaneKey {
    lane_of(&header_pairs(message), stream_sequence)
}

/// Stops in order: hand back what the client buffered, let running
/// handlers finish until the deadline (waiting messages are handed back),
/// then abandon the rest.
async fn drain(shared: &Shared, stop: &Stop, workers: &mut JoinSet<()>, messages: Option<Stream>) {
    stop.draining.cancel();
    if let Some(stream) = messages {
        hand_back_buffered(shared, stream).await;
    }
    if tokio::time::timeout(shared.shutdown_timeout, join_all(workers))
        .await
        .is_err()
    {
        tracing::warn!(
            consumer = %shared.consumer,
            timeout = ?shared.shutdown_timeout,
            "handlers still running at the shutdown deadline; abandoning them"
        );
        stop.hard.cancel();
        if tokio::time::timeout(HARD_STOP_GRACE, join_all(workers))
            .await
            .is_err()
        {
            workers.abort_all();
        }
    }
    shared.report_in_flight();
}

/// Hands back (naks) what the client buffered of `stream` and drops it:
/// its pull requests end.
async fn hand_back_buffered(shared: &Shared, mut stream: Stream) {
    while let Some(Some(Ok(message))) = stream.next().now_or_never() {
        let incoming = Incoming {
            message,
            deliveries: 0,
            stream_sequence: 0,
        };
        settle::abandon(shared, &incoming, UNKNOWN_EVENT).await;
    }
}

async fn join_all(workers: &mut JoinSet<()>) {
    while workers.join_next().await.is_some() {}
}
