//! The task that drives one aggregate's lane: handles its messages one at a
//! time, keeps waiting ones alive with progress acks, and defers what
//! follows a message that failed and is away for redelivery.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;

use async_nats::Subject;
use tokio::time::{Instant, MissedTickBehavior, interval_at, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, field::Empty};

use super::dispatch::{self, Decision, Incoming};
use super::metrics::UNKNOWN_EVENT;
use super::ordering::{LaneKey, Lanes, Next};
use super::settle;
use super::shared::Shared;

/// Shutdown signals, as workers see them.
#[derive(Clone, Default)]
pub(crate) struct Stop {
    /// Set when shutdown starts: start no new handler, hand waiting
    /// messages back.
    pub(crate) draining: CancellationToken,
    /// Set when the shutdown deadline passed: abandon running handlers.
    pub(crate) hard: CancellationToken,
}

/// Drives `key`'s lane until it is empty. Should the worker itself panic
/// (handler panics are caught earlier; this is for bugs, a panicking
/// tracing layer or metrics recorder), the lane is released and what waited
/// in it handed back, so the aggregate is not stuck.
pub(crate) async fn run_lane(
    shared: Arc<Shared>,
    lanes: Lanes<Incoming>,
    key: LaneKey,
    stop: Stop,
) {
    let driving = drive_lane(Arc::clone(&shared), lanes.clone(), Arc::clone(&key), stop);
    if AssertUnwindSafe(driving).catch_unwind().await.is_err() {
        tracing::error!(consumer = %shared.consumer, "lane worker panicked; handing its messages back");
        for waiting in lanes.release(&key) {
            settle::abandon(&shared, &waiting.item, UNKNOWN_EVENT).await;
        }
    }
}

async fn drive_lane(shared: Arc<Shared>, lanes: Lanes<Incoming>, key: LaneKey, stop: Stop) {
    let period = shared.progress_interval();
    let mut progress = interval_at(Instant::now() + period, period);
    progress.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let job = match lanes.next(&key, stop.draining.is_cancelled()) {
            Next::Run(job) => job,
            Next::Done => return,
            Next::Wait { wake, until } => {
                tokio::select! {
                    () = wake.notified() => {}
                    () = sleep_until(until) => {}
                    () = stop.draining.cancelled() => {}
                    _ = progress.tick() => keep_alive(&shared, &lanes, &key, None).await,
                }
                continue;
            }
        };
        if stop.draining.is_cancelled() {
            settle::abandon(&shared, &job.item, UNKNOWN_EVENT).await;
            continue;
        }
        let span = tracing::info_span!(
            "outbox.consume",
            consumer = %shared.consumer,
            stream_sequence = job.sequence,
            delivery = job.item.deliveries,
            event = Empty,
            event_version = Empty,
            message_id = Empty,
            aggregate_type = Empty,
            aggregate_id = Empty,
            sequence = Empty,
            correlation_id = Empty,
            trace_id = Empty,
            parent_span_id = Empty,
            outcome = Empty,
        );
        let verdict = {
            let deciding = dispatch::decide(&shared, &job.item, &span).instrument(span.clone());
            tokio::pin!(deciding);
            loop {
                tokio::select! {
                    biased;
                    verdict = &mut deciding => break Some(verdict),
                    () = stop.hard.cancelled() => break None,
                    _ = progress.tick() => keep_alive(&shared, &lanes, &key, Some(&job.item)).await,
                }
            }
        };
        let Some(verdict) = verdict else {
            // The deadline passed: the handler is dropped mid-way (a
            // transaction it held rolls back) and the message handed back.
            settle::abandon(&shared, &job.item, UNKNOWN_EVENT).await;
            continue;
        };
        // Mark it away before the nak, so an early redelivery finds it so.
        let behind = match &verdict.decision {
            Decision::Retry { delay, .. } => lanes.send_away(&key, job.sequence, *delay),
            _ => Vec::new(),
        };
        settle::settle(&shared, &job.item, verdict, &span).await;
        drop(job);
        for (waiting, delay) in behind {
            settle::defer(&shared, &waiting.item, delay).await;
        }
        shared.report_in_flight();
    }
}

/// Sends a progress ack (`+WPI`) for the running message and every message
/// waiting in the lane, so none reaches its ack wait while it waits its turn.
async fn keep_alive(
    shared: &Shared,
    lanes: &Lanes<Incoming>,
    key: &LaneKey,
    running: Option<&Incoming>,
) {
    let mut replies: Vec<Option<Subject>> =
        lanes.for_each_waiting(key, |waiting| waiting.message.reply.clone());
    replies.extend(running.map(|running| running.message.reply.clone()));
    for reply in replies {
        settle::progress(shared, reply).await;
    }
}
