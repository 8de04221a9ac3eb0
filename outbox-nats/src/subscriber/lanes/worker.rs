//! The task that drives one aggregate's lane: handles its messages one at a
//! time, each in a handler slot (`max_in_flight`) taken only to run it,
//! keeps the running one alive with progress acks, and marks a message that
//! failed as away so that what follows it waits for it. (The messages
//! waiting in lanes are kept alive by the fetch loop.)

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Interval, MissedTickBehavior, interval_at, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use txoutbox_core::consumer::FailureCause;

use super::dispatch::{self, Decision, Incoming};
use super::ordering::{Front, LaneKey, Lanes, Queued};
use super::settle;
use crate::subscriber::health::UNKNOWN_EVENT;
use crate::subscriber::holds::holding;
use crate::subscriber::setup::Shared;

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
        let Some((job, slot)) = next_job(&shared, &lanes, &key, &stop).await else {
            return;
        };
        let Some(_slot) = slot else {
            settle::abandon(&shared, &job.item, UNKNOWN_EVENT).await;
            continue;
        };
        handle_job(&shared, &lanes, &key, job, &stop, &mut progress).await;
    }
}

/// Handles one message of `key`'s lane, taken from it: parks it if its
/// aggregate is held, else runs its handler (keeping it alive with
/// progress acks meanwhile) and settles it; a message that failed is
/// marked away first, so what follows it waits for it.
pub(crate) async fn handle_job(
    shared: &Arc<Shared>,
    lanes: &Lanes<Incoming>,
    key: &LaneKey,
    job: Queued<Incoming>,
    stop: &Stop,
    progress: &mut Interval,
) {
    let span = dispatch::consume_span(&shared.consumer, job.sequence, job.item.deliveries);
    #[cfg(feature = "opentelemetry")]
    continue_trace(&span, &job.item);
    let delivered = job.item.delivered();
    if let Some(parked) = holding::park_if_held(shared, &delivered, key).await {
        if let Decision::Wait { cause, reason } = &parked.decision {
            shared.pause.interrupted(*cause, reason).await;
            drop(delivered);
            lanes.put_back(key, job);
            return;
        }
        if let Decision::Retry { delay, .. } = &parked.decision {
            lanes.send_away(key, job.sequence, *delay);
        }
        settle::settle(shared, &job.item, parked, &span).await;
        drop(delivered);
        drop(job);
        shared.report_in_flight();
        return;
    }
    let verdict = {
        let deciding =
            dispatch::decide_delivered(shared, &delivered, &span).instrument(span.clone());
        tokio::pin!(deciding);
        loop {
            tokio::select! {
                biased;
                verdict = &mut deciding => break Some(verdict),
                () = stop.hard.cancelled() => break None,
                _ = progress.tick() => settle::progress(shared, job.item.message.reply.clone()).await,
            }
        }
    };
    let Some(verdict) = verdict else {
        // The deadline passed: the handler is dropped mid-way (a
        // transaction it held rolls back) and the message handed back.
        settle::abandon(shared, &job.item, UNKNOWN_EVENT).await;
        return;
    };
    // Not the message's fault, or its hold cannot be recorded: it goes
    // back to its lane, unsettled, and is applied again (after the pause).
    let waits = match &verdict.decision {
        Decision::Wait { cause, reason } => Some((*cause, reason.clone())),
        _ => holding::hold_if_dead(shared, &verdict, &delivered, key)
            .await
            .err()
            .map(|reason| (FailureCause::Unavailable, reason)),
    };
    if let Some((cause, reason)) = waits {
        shared.pause.interrupted(cause, &reason).await;
        drop(delivered);
        lanes.put_back(key, job);
        return;
    }
    // Mark it away before the nak, so that its redelivery finds it so
    // and what follows it waits for it.
    if let Decision::Retry { delay, .. } = &verdict.decision {
        lanes.send_away(key, job.sequence, *delay);
    }
    settle::settle(shared, &job.item, verdict, &span).await;
    drop(delivered);
    drop(job);
    shared.report_in_flight();
}

/// The lane's next message and the handler slot to run it in; without a
/// slot when shutdown started (the message is to be handed back). `None`
/// when the lane is empty (its worker ends).
///
/// The worker waits for an earlier message away, then for a slot, while the
/// message stays in the lane (kept alive by the fetch loop, and behind an
/// earlier one that may arrive meanwhile); it takes the lane's first message
/// only once it holds the slot.
async fn next_job(
    shared: &Shared,
    lanes: &Lanes<Incoming>,
    key: &LaneKey,
    stop: &Stop,
) -> Option<(Queued<Incoming>, Option<OwnedSemaphorePermit>)> {
    loop {
        let draining = stop.draining.is_cancelled();
        match lanes.front(key, draining) {
            Front::Done => return None,
            Front::Wait { wake, until } => {
                tokio::select! {
                    () = wake.notified() => {}
                    () = sleep_until(until) => {}
                    () = stop.draining.cancelled() => {}
                }
                continue;
            }
            Front::Ready if draining => {
                if let Some(job) = lanes.take(key, true) {
                    return Some((job, None));
                }
                continue;
            }
            Front::Ready => {}
        }
        if shared.pause.is_paused() {
            tokio::select! {
                () = shared.pause.resumed() => {}
                () = stop.draining.cancelled() => {}
            }
            continue;
        }
        let slot = tokio::select! {
            slot = shared.slot() => slot,
            () = stop.draining.cancelled() => continue,
        };
        let Ok(slot) = slot else {
            // The semaphore is never closed; treat it as a shutdown.
            stop.draining.cancel();
            continue;
        };
        if let Some(job) = lanes.take(key, false) {
            return Some((job, Some(slot)));
        }
    }
}

/// Makes the `outbox.consume` span a child of the producer's OpenTelemetry
/// trace context (the message's `traceparent` and `tracestate` headers),
/// before the span is first entered (its parent cannot change after).
/// A missing or unreadable `traceparent` leaves the span where it is (the
/// envelope's own check reports an unreadable one).
#[cfg(feature = "opentelemetry")]
pub(crate) fn continue_trace(span: &tracing::Span, incoming: &Incoming) {
    let headers = dispatch::header_pairs(&incoming.message);
    let traceparent = dispatch::header(&headers, txoutbox_core::wire::TRACEPARENT)
        .and_then(|value| value.parse::<txoutbox_core::TraceParent>().ok());
    if let Some(traceparent) = traceparent {
        let tracestate = dispatch::header(&headers, txoutbox_core::wire::TRACESTATE);
        txoutbox_core::otel::set_parent(span, &traceparent, tracestate);
    }
}
