//! Publishing one claimed batch: aggregates in parallel, each aggregate's
//! messages one after another, many acks in flight, the lease renewed.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::abandoned::{Triage, is_suspect};
use super::metrics;
use super::sync::locked;
use super::unrecorded::{Settlement, Unrecorded};
use crate::id::MessageId;
use crate::publisher::{PublishErrorKind, Publisher};
use crate::store::{ClaimedBatch, ClaimedMessage, Failure, FailureKind, OutboxStore, Published};

/// What the processor gives every batch.
pub(crate) struct BatchContext<S, P> {
    pub(crate) store: Arc<S>,
    pub(crate) publisher: Arc<P>,
    /// Bounds the publishes awaiting an ack, over all batches.
    pub(crate) permits: Arc<Semaphore>,
    /// Cancelled at shutdown: start no new publish.
    pub(crate) shutdown: CancellationToken,
    /// Cancelled at the shutdown deadline: stop waiting for acks.
    pub(crate) abort: CancellationToken,
    pub(crate) lease: Duration,
    pub(crate) retry: crate::store::RetryPolicy,
    /// The most messages of one aggregate handed to the publisher at once
    /// (never more than the permits there are).
    pub(crate) run_window: usize,
    /// One permit: at most one group of suspects (see `abandoned.rs`) is
    /// published at a time in this process.
    pub(crate) isolation: Arc<Semaphore>,
    /// Where a batch leaves what it could not record (the database away).
    pub(crate) unrecorded: Arc<Unrecorded>,
}

/// What became of a batch.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct BatchReport {
    pub(crate) claimed: usize,
    /// Its claim stopped at its limit ([`ClaimedBatch::more`]): it may
    /// have cut an aggregate's run in two.
    pub(crate) more: bool,
    pub(crate) published: u64,
    pub(crate) failed: u64,
    pub(crate) dead: u64,
    pub(crate) released: u64,
    /// The broker was unavailable: pause before claiming again.
    pub(crate) broker_unavailable: bool,
    /// The lease was lost (renewal found it taken over).
    pub(crate) lease_lost: bool,
}

/// The messages' fates, gathered while publishing.
#[derive(Default)]
struct Outcomes {
    published: Vec<Published>,
    failures: Vec<Failure>,
    dead: u64,
    released: Vec<MessageId>,
}

/// Publishes `batch`, whose lease started no earlier than `leased_at`, and
/// settles it: one completion statement, one release statement, one
/// statement per failure (failures are the exception). Messages whose
/// earlier claims ended without a settlement are isolated first (see
/// `abandoned.rs`): dead past the limit, published in a small group settled
/// on its own, or released untouched.
pub(crate) async fn run<S: OutboxStore, P: Publisher>(
    ctx: Arc<BatchContext<S, P>>,
    batch: ClaimedBatch,
    leased_at: Instant,
) -> BatchReport {
    let token = batch.lease.token;
    let claimed = batch.messages.len();
    let more = batch.more;
    ::metrics::histogram!(metrics::BATCH_SIZE).record(claimed as f64);
    let suspects = batch.messages.iter().any(|m| is_suspect(m.abandoned));
    let isolation = suspects
        .then(|| Arc::clone(&ctx.isolation).try_acquire_owned().ok())
        .flatten();
    let triage = Triage::of(batch.messages, isolation.is_some());
    let early = settle_abandoned(&ctx, token, &triage).await;
    let (normal, isolated) = tokio::join!(
        publish_and_settle(&ctx, token, &triage.normal, leased_at),
        async {
            let _isolation = isolation; // held until the group is settled
            publish_and_settle(&ctx, token, &triage.isolated, leased_at).await
        }
    );
    BatchReport {
        claimed,
        more,
        published: normal.published + isolated.published,
        failed: normal.failed + isolated.failed,
        dead: early.dead + normal.dead + isolated.dead,
        released: early.released + normal.released + isolated.released,
        broker_unavailable: normal.broker_unavailable || isolated.broker_unavailable,
        lease_lost: normal.lease_lost || isolated.lease_lost,
    }
}

/// Before anything is published: sends the messages past
/// [`ABANDONED_LIMIT`](super::ABANDONED_LIMIT) dead, and releases the suspects not isolated this
/// time (and what waits behind them), so a crash now does not count
/// against them.
async fn settle_abandoned<S: OutboxStore, P: Publisher>(
    ctx: &BatchContext<S, P>,
    token: crate::id::LeaseToken,
    triage: &Triage,
) -> BatchReport {
    let failures: Vec<Failure> = triage
        .dead
        .iter()
        .map(|claimed| {
            let message = &claimed.message;
            ::metrics::counter!(metrics::FAILED, "kind" => "abandoned").increment(1);
            ::metrics::counter!(metrics::DEAD).increment(1);
            tracing::error!(
                message_id = %message.id, event = %message.event_name,
                abandoned = claimed.abandoned,
                "outbox message is dead: every processor that claimed it ended without settling it"
            );
            Failure {
                id: message.id,
                error: format!(
                    "claimed {} times by processors that ended without settling it (crashed, \
                     were killed or hung while publishing it); not tried again",
                    claimed.abandoned
                ),
                kind: FailureKind::Permanent,
            }
        })
        .collect();
    let dead = failures.len() as u64;
    let mut settlement = Settlement::new(token);
    settlement.failures = failures;
    settlement.released = triage.released.clone();
    ctx.unrecorded
        .settle(&*ctx.store, &ctx.retry, settlement)
        .await;
    BatchReport {
        dead,
        released: triage.released.len() as u64,
        ..BatchReport::default()
    }
}

/// Publishes `messages` (leased under `token` since no earlier than
/// `leased_at`) and settles them.
async fn publish_and_settle<S: OutboxStore, P: Publisher>(
    ctx: &BatchContext<S, P>,
    token: crate::id::LeaseToken,
    messages: &[ClaimedMessage],
    leased_at: Instant,
) -> BatchReport {
    if messages.is_empty() {
        return BatchReport::default();
    }
    let claimed = messages.len();

    // A publish is started only while the lease has a fifth of its time left:
    // past that, another processor may claim the batch before our ack lands.
    let margin = ctx.lease / super::config::LEASE_MARGIN_DIVISOR;
    let valid_until = Mutex::new(leased_at + ctx.lease - margin);
    let stop = ctx.shutdown.child_token();
    // Cancelled when the lease on any message of the batch is lost: runs in
    // flight are abandoned (their outcome no longer matters: the messages
    // taken over are re-published by their new holder, deduplicated; the
    // others are released).
    let lost = CancellationToken::new();
    let outcomes = Mutex::new(Outcomes::default());
    let unavailable = std::sync::atomic::AtomicBool::new(false);

    let lease_lost = {
        let chains: FuturesUnordered<_> = by_aggregate(messages)
            .map(|chain| {
                let stops = Stops {
                    stop: &stop,
                    lost: &lost,
                };
                publish_chain(ctx, chain, stops, &valid_until, &outcomes, &unavailable)
            })
            .collect();
        let publishing = chains.collect::<Vec<()>>();
        tokio::pin!(publishing);
        // Renewing runs beside publishing, never in its way: a slow renewal
        // does not hold back acks.
        let renewing = keep_renewed(ctx, token, messages, leased_at, margin, &valid_until, &lost);
        let lease_lost = tokio::select! {
            _ = &mut publishing => false,
            () = renewing => true,
        };
        stop.cancel();
        if lease_lost {
            // No new publish starts; the ones in flight end so their outcome
            // is known.
            publishing.await;
        }
        lease_lost
    };

    let outcomes = outcomes
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let broker_unavailable = unavailable.into_inner();
    let report = BatchReport {
        claimed,
        more: false,
        published: outcomes.published.len() as u64,
        failed: outcomes.failures.len() as u64,
        dead: outcomes.dead,
        released: outcomes.released.len() as u64,
        broker_unavailable,
        lease_lost,
    };
    settle(ctx, token, outcomes).await;
    tracing::debug!(
        published = report.published,
        failed = report.failed,
        released = report.released,
        "outbox batch settled"
    );
    report
}

/// Renews the lease on `messages` (the whole batch: nothing is settled before the
/// batch ends) every third of it until any of them is lost (then cancels
/// `lost` and returns); never returns while the lease holds on every one.
///
/// A partial loss stops the whole batch: the messages taken over belong to
/// another processor now, and which of the rest it may also take next is not
/// known; what was published is completed, the rest released.
async fn keep_renewed<S: OutboxStore, P: Publisher>(
    ctx: &BatchContext<S, P>,
    token: crate::id::LeaseToken,
    messages: &[ClaimedMessage],
    leased_at: Instant,
    margin: Duration,
    valid_until: &Mutex<Instant>,
    lost: &CancellationToken,
) {
    let mut renewals = tokio::time::interval_at(leased_at + ctx.lease / 3, ctx.lease / 3);
    let mut ids: Option<Vec<MessageId>> = None;
    loop {
        renewals.tick().await;
        // Built on the first renewal only: most batches end before it.
        let ids = ids.get_or_insert_with(|| messages.iter().map(|c| c.message.id).collect());
        let renewed_at = Instant::now();
        match ctx.store.renew(token, ids.as_slice(), ctx.lease).await {
            Ok(outcome) if outcome.stale == 0 => {
                *locked(valid_until) = renewed_at + ctx.lease - margin;
            }
            Ok(outcome) => {
                tracing::warn!(
                    %token, lost = outcome.stale, held = outcome.applied,
                    "outbox lease lost: another processor took messages of the batch over"
                );
                lost.cancel();
                return;
            }
            // The old lease still holds until `valid_until`.
            Err(err) => {
                tracing::warn!(%token, error = %crate::ErrorChain(&err), "outbox lease renewal failed")
            }
        }
    }
}

/// Why a chain stops early.
#[derive(Clone, Copy)]
struct Stops<'a> {
    /// Start no new publish (shutdown, broker unavailable, lease lost).
    stop: &'a CancellationToken,
    /// The lease was lost: abandon the run in flight too.
    lost: &'a CancellationToken,
}

/// Consecutive runs of one aggregate (claims come sorted by aggregate, then
/// sequence).
fn by_aggregate(messages: &[ClaimedMessage]) -> impl Iterator<Item = &[ClaimedMessage]> {
    messages.chunk_by(ClaimedMessage::same_aggregate)
}

/// Publishes one aggregate's messages in order, a run at a time through
/// [`Publisher::publish_run`] (several in flight where the publisher can keep
/// them in order). The first failure ends the chain: what follows is
/// released, so nothing overtakes a failed message.
async fn publish_chain<S: OutboxStore, P: Publisher>(
    ctx: &BatchContext<S, P>,
    chain: &[ClaimedMessage],
    Stops { stop, lost }: Stops<'_>,
    valid_until: &Mutex<Instant>,
    outcomes: &Mutex<Outcomes>,
    unavailable: &std::sync::atomic::AtomicBool,
) {
    let record = |f: &mut dyn FnMut(&mut Outcomes)| {
        f(&mut locked(outcomes));
    };
    let release_from = |index: usize| {
        record(&mut |o| {
            o.released
                .extend(chain[index..].iter().map(|c| c.message.id))
        })
    };
    let mut index = 0;
    while index < chain.len() {
        let lease_left = *locked(valid_until);
        if stop.is_cancelled() || Instant::now() >= lease_left {
            return release_from(index);
        }
        let window = &chain[index..chain.len().min(index + ctx.run_window)];
        let wanted = u32::try_from(window.len()).unwrap_or(u32::MAX);
        let permits = tokio::select! {
            permits = ctx.permits.acquire_many(wanted) => permits,
            () = stop.cancelled() => return release_from(index),
        };
        let Ok(_permits) = permits else {
            return release_from(index); // the semaphore is never closed
        };
        let run: Vec<&crate::message::OutboxMessage> = window.iter().map(|c| &c.message).collect();
        // Open from the handover to the publisher to the message's outcome.
        let spans: Vec<tracing::Span> = run.iter().map(|m| publish_span(m)).collect();
        let results = tokio::select! {
            results = ctx.publisher.publish_run(&run) => results,
            () = ctx.abort.cancelled() => return release_from(index),
            () = lost.cancelled() => return release_from(index),
        };
        if results.is_empty() {
            return release_from(index); // a publisher that published nothing
        }
        for ((claimed, result), span) in window.iter().zip(results).zip(&spans) {
            let message = &claimed.message;
            span.record(
                "outcome",
                match &result {
                    Ok(ack) if ack.duplicate => "duplicate",
                    Ok(_) => "published",
                    Err(_) => "failed",
                },
            );
            match result {
                Ok(ack) => {
                    if let Some(stream_sequence) = ack.stream_sequence {
                        span.record("stream_sequence", stream_sequence);
                    }
                    metrics::acked(message, ack.duplicate);
                    record(&mut |o| {
                        o.published.push(Published {
                            id: message.id,
                            stream_sequence: ack.stream_sequence,
                        })
                    });
                    index += 1;
                }
                Err(err) if err.kind() == PublishErrorKind::Unavailable => {
                    if !unavailable.swap(true, std::sync::atomic::Ordering::AcqRel) {
                        tracing::warn!(error = %crate::ErrorChain(&err), "outbox broker unavailable; pausing");
                    }
                    stop.cancel();
                    return release_from(index);
                }
                Err(err) => {
                    record_failure(ctx, claimed, &err, outcomes);
                    return release_from(index + 1);
                }
            }
        }
    }
}

/// The level of the per-message `outbox.publish` span: `info` with the
/// `opentelemetry` feature (it is the publish step of the message's trace),
/// `debug` without it (one span per message is too much at `info` for a
/// processor publishing tens of thousands of messages a second).
const PUBLISH_SPAN_LEVEL: tracing::Level = if cfg!(feature = "opentelemetry") {
    tracing::Level::INFO
} else {
    tracing::Level::DEBUG
};

/// The `outbox.publish` span of one message: a child of the current
/// (`outbox.batch`) span, and with the `opentelemetry` feature of the trace
/// context the message carries (the span that was current when it was
/// sealed), so the publish joins the trace of the request that saved it.
fn publish_span(message: &crate::message::OutboxMessage) -> tracing::Span {
    let span = tracing::span!(
        PUBLISH_SPAN_LEVEL,
        "outbox.publish",
        message_id = %message.id,
        event = %message.event_name,
        subject = %message.subject,
        aggregate_type = %message.aggregate_type,
        aggregate_id = %message.aggregate_id,
        sequence = message.sequence,
        stream_sequence = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    #[cfg(feature = "opentelemetry")]
    if let Some(traceparent) = &message.traceparent {
        crate::otel::set_parent(&span, traceparent, message.tracestate.as_deref());
    }
    span
}

/// Records a message the broker rejected: retried later, or dead when the
/// failure is permanent or its attempts are spent.
fn record_failure<S: OutboxStore, P: Publisher>(
    ctx: &BatchContext<S, P>,
    claimed: &ClaimedMessage,
    err: &crate::publisher::PublishError,
    outcomes: &Mutex<Outcomes>,
) {
    let message = &claimed.message;
    let kind = match err.kind() {
        PublishErrorKind::Permanent => FailureKind::Permanent,
        _ => FailureKind::Retryable,
    };
    let dead = kind == FailureKind::Permanent
        || claimed.attempts.saturating_add(1) >= ctx.retry.max_attempts;
    let label = if kind == FailureKind::Permanent {
        "permanent"
    } else {
        "rejected"
    };
    ::metrics::counter!(metrics::FAILED, "kind" => label).increment(1);
    if dead {
        ::metrics::counter!(metrics::DEAD).increment(1);
        tracing::error!(
            message_id = %message.id, event = %message.event_name,
            attempts = claimed.attempts + 1, error = %crate::ErrorChain(&err),
            "outbox message is dead"
        );
    } else {
        tracing::warn!(
            message_id = %message.id, event = %message.event_name,
            attempts = claimed.attempts + 1, error = %crate::ErrorChain(&err),
            "outbox publish rejected; will retry"
        );
    }
    let mut outcomes = locked(outcomes);
    outcomes.failures.push(Failure {
        id: message.id,
        error: err.to_string(),
        kind,
    });
    outcomes.dead += u64::from(dead);
}

/// Records the batch's outcome: one statement each for the completion,
/// the failures and the release. What the database does not take (it is
/// away) the batch leaves with the processor ([`Unrecorded`]), which
/// claims nothing more and records it first when the database answers:
/// a completion recorded late rather than a re-publish late, which the
/// stream deduplicates only inside its duplicate window (see the guide's
/// chapter on guarantees, `txoutbox::guide::guarantees`, "The bound on
/// re-publishes").
async fn settle<S: OutboxStore, P: Publisher>(
    ctx: &BatchContext<S, P>,
    token: crate::id::LeaseToken,
    outcomes: Outcomes,
) {
    if !outcomes.released.is_empty() {
        ::metrics::counter!(metrics::RELEASED).increment(outcomes.released.len() as u64);
    }
    let mut settlement = Settlement::new(token);
    settlement.published = outcomes.published;
    settlement.failures = outcomes.failures;
    settlement.released = outcomes.released;
    ctx.unrecorded
        .settle(&*ctx.store, &ctx.retry, settlement)
        .await;
}
