//! The inbox groups of a running subscriber (see
//! [`InboxGroups`](crate::subscriber::InboxGroups)): instead of a worker task per
//! lane, one task drives every lane. A lane that has messages is *ready*
//! (its key sent on a channel); the task takes the run of messages each
//! ready lane may apply now (in stream order, none behind a message away),
//! up to the group's size, and applies them in one inbox transaction on a
//! task of its own, at most `transactions` groups at once. A lane is in at
//! most one group at a time: it is owned (its `worker`) from the moment it
//! is ready until it is empty, so each aggregate's messages are applied in
//! stream order, never two at once.
//!
//! After a group, its lanes are ready again (the task finds them empty,
//! waiting, or with more to apply); a lane waiting for a message away gets
//! a small task that makes it ready when that message is back or its grace
//! ends.

use std::collections::{HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior, interval_at, sleep_until, timeout_at};
use txoutbox_core::consumer::ConsumerInbox;

use super::group_apply::{self, GroupMember, MemberOutcome};
use super::inbox_groups::InboxGroups;
use crate::subscriber::health::UNKNOWN_EVENT;
use crate::subscriber::holds::holding;
use crate::subscriber::lanes::dispatch::{self, Decision, Incoming};
use crate::subscriber::lanes::settle;
use crate::subscriber::lanes::{Front, LaneKey, Lanes, Queued};
use crate::subscriber::lanes::{Stop, handle_job};
use crate::subscriber::setup::Shared;

/// Where a lane with messages and no worker is announced: the inbox
/// groups drive it.
pub(crate) type Ready = mpsc::UnboundedSender<LaneKey>;

/// The channel of ready lanes.
pub(crate) fn ready_lanes() -> (Ready, mpsc::UnboundedReceiver<LaneKey>) {
    mpsc::unbounded_channel()
}

/// What the groups of one subscriber loop share.
struct Groups {
    shared: Arc<Shared>,
    lanes: Lanes<Incoming>,
    inbox: Arc<dyn ConsumerInbox>,
    ready: Ready,
    stop: Stop,
}

/// Drives every lane announced on `incoming` until shutdown: forms groups
/// and applies them; when draining, hands back what is ready and waits
/// for the running groups.
pub(crate) async fn run(
    shared: Arc<Shared>,
    lanes: Lanes<Incoming>,
    inbox: Arc<dyn ConsumerInbox>,
    settings: InboxGroups,
    ready: Ready,
    mut incoming: mpsc::UnboundedReceiver<LaneKey>,
    stop: Stop,
) {
    let groups = Arc::new(Groups {
        shared,
        lanes,
        inbox,
        ready,
        stop,
    });
    let slots = Arc::new(Semaphore::new(settings.concurrent_transactions()));
    let most = settings.max_messages_per_group();
    let mut tasks = JoinSet::new();
    let mut backlog: VecDeque<LaneKey> = VecDeque::new();
    loop {
        let draining = groups.stop.draining.is_cancelled();
        let first = match backlog.pop_front() {
            Some(key) => key,
            None => tokio::select! {
                biased;
                Some(key) = incoming.recv() => key,
                Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
                () = groups.stop.draining.cancelled(), if !draining || tasks.is_empty() => {
                    if tasks.is_empty() {
                        match incoming.try_recv() {
                            Ok(key) => key,
                            Err(_) => return,
                        }
                    } else {
                        continue;
                    }
                }
            },
        };
        if draining {
            hand_back_lane(&groups, &first).await;
            continue;
        }
        // Paused (the inbox's database is away): no group starts.
        if groups.shared.pause.is_paused() {
            backlog.push_front(first);
            tokio::select! {
                () = groups.shared.pause.resumed() => {}
                () = groups.stop.draining.cancelled() => {}
            }
            continue;
        }
        // A connection for the group: while every one is busy, more lanes
        // become ready and the group grows.
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot,
            () = groups.stop.draining.cancelled() => {
                backlog.push_front(first);
                continue;
            }
        };
        let Ok(slot) = slot else {
            return; // never closed
        };
        let deadline = Instant::now() + settings.wait();
        let mut runs: Vec<(LaneKey, Vec<Queued<Incoming>>)> = Vec::new();
        let mut size = 0;
        let mut next = Some(first);
        while let Some(key) = next.take() {
            let (front, run) = groups.lanes.take_run(&key, most - size);
            match front {
                Front::Ready if run.is_empty() => backlog.push_back(key),
                Front::Ready => {
                    size += run.len();
                    runs.push((key, run));
                }
                Front::Wait { wake, until } => {
                    let (ready, stop) = (groups.ready.clone(), groups.stop.clone());
                    tasks.spawn(async move {
                        tokio::select! {
                            () = wake.notified() => {}
                            () = sleep_until(until) => {}
                            () = stop.draining.cancelled() => {}
                        }
                        let _ = ready.send(key);
                    });
                }
                Front::Done => {}
            }
            if size >= most {
                break;
            }
            next = match incoming.try_recv() {
                Ok(key) => Some(key),
                Err(_) if Instant::now() < deadline => {
                    timeout_at(deadline, incoming.recv()).await.ok().flatten()
                }
                Err(_) => None,
            };
        }
        if runs.is_empty() {
            continue;
        }
        tasks.spawn(apply_runs(Arc::clone(&groups), runs, slot));
    }
}

/// Shutdown: every message of `key`'s lane is handed back.
async fn hand_back_lane(groups: &Groups, key: &LaneKey) {
    while let Some(job) = groups.lanes.take(key, true) {
        settle::abandon(&groups.shared, &job.item, UNKNOWN_EVENT).await;
    }
}

/// Applies one group and settles it, then announces its lanes again.
/// Should this panic (a bug: handler panics are caught earlier), the
/// group's lanes are released and what waited in them handed back.
async fn apply_runs(
    groups: Arc<Groups>,
    runs: Vec<(LaneKey, Vec<Queued<Incoming>>)>,
    slot: OwnedSemaphorePermit,
) {
    let keys: Vec<LaneKey> = runs.iter().map(|(key, _)| Arc::clone(key)).collect();
    let applying = apply_and_settle(&groups, runs);
    let applied = AssertUnwindSafe(applying).catch_unwind().await;
    drop(slot);
    let alone = match applied {
        Ok(alone) => alone,
        Err(_) => {
            tracing::error!(consumer = %groups.shared.consumer, "an inbox group panicked; handing its lanes' messages back");
            for key in &keys {
                for waiting in groups.lanes.release(key) {
                    settle::abandon(&groups.shared, &waiting.item, UNKNOWN_EVENT).await;
                }
            }
            return;
        }
    };
    for key in keys
        .iter()
        .filter(|key| !alone.iter().any(|(own, _)| own == *key))
    {
        let _ = groups.ready.send(Arc::clone(key));
    }
    // Without the group's connection slot: one that waits (a row another
    // process's open transaction holds) holds up its own aggregate only.
    let handling = alone
        .into_iter()
        .map(|(key, job)| apply_alone(&groups, key, job));
    futures::future::join_all(handling).await;
}

/// Applies one message alone, as a lane worker does (in a handler slot,
/// `max_in_flight`), then announces its lane again.
async fn apply_alone(groups: &Groups, key: LaneKey, job: Queued<Incoming>) {
    let shared = &groups.shared;
    let period = shared.progress_interval();
    let mut progress = interval_at(Instant::now() + period, period);
    progress.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Out of its lane while it waits for a slot: kept alive here.
    let acquiring = shared.slot();
    tokio::pin!(acquiring);
    let slot = loop {
        tokio::select! {
            slot = &mut acquiring => break slot.ok(),
            () = groups.stop.draining.cancelled() => break None,
            _ = progress.tick() => settle::progress(shared, job.item.message.reply.clone()).await,
        }
    };
    match slot {
        Some(_slot) => {
            let handling = handle_job(
                shared,
                &groups.lanes,
                &key,
                job,
                &groups.stop,
                &mut progress,
            );
            // Should the handling itself panic (handler panics are caught
            // earlier; this is for bugs), the lane is released and what
            // waited in it handed back, so the aggregate is not stuck.
            if AssertUnwindSafe(handling).catch_unwind().await.is_err() {
                tracing::error!(consumer = %shared.consumer, "applying a message alone panicked; handing its lane's messages back");
                for waiting in groups.lanes.release(&key) {
                    settle::abandon(shared, &waiting.item, UNKNOWN_EVENT).await;
                }
                return;
            }
        }
        // Shutdown: handed back.
        None => settle::abandon(shared, &job.item, UNKNOWN_EVENT).await,
    }
    let _ = groups.ready.send(key);
}

/// Where one message of a group's runs stands.
enum Part {
    /// In the group: member number.
    Member(usize),
    /// The first message of its lane, applied alone after the group
    /// (a redelivery, a handler with a transaction of its own, a held
    /// aggregate, a message that cannot be decoded).
    Alone,
    /// Back to its lane.
    Back,
}

/// Applies the group formed of `runs` and settles its messages; returns
/// those to apply alone (each the first of its lane, whose lane is not
/// announced again until it is settled).
async fn apply_and_settle(
    groups: &Groups,
    runs: Vec<(LaneKey, Vec<Queued<Incoming>>)>,
) -> Vec<(LaneKey, Queued<Incoming>)> {
    let shared = &groups.shared;
    let taken: Vec<(LaneKey, Queued<Incoming>)> = runs
        .into_iter()
        .flat_map(|(key, run)| run.into_iter().map(move |job| (Arc::clone(&key), job)))
        .collect();
    let mut parts = Vec::with_capacity(taken.len());
    let mut members = Vec::with_capacity(taken.len());
    let mut stopped: HashSet<&LaneKey> = HashSet::new();
    let mut seen: HashSet<&LaneKey> = HashSet::new();
    let mut ids = HashSet::new();
    for (key, job) in &taken {
        let first = seen.insert(key);
        if stopped.contains(key) {
            parts.push(Part::Back);
            continue;
        }
        let delivered = job.item.delivered();
        let span = dispatch::consume_span(&shared.consumer, job.sequence, job.item.deliveries);
        #[cfg(feature = "opentelemetry")]
        crate::subscriber::lanes::continue_trace(&span, &job.item);
        let envelope = group_apply::joins_group(shared, &delivered, key, &span)
            .filter(|envelope| ids.insert(envelope.id));
        match envelope {
            Some(envelope) => {
                parts.push(Part::Member(members.len()));
                members.push(GroupMember {
                    key: Arc::clone(key),
                    delivered,
                    envelope,
                    span,
                });
            }
            // Applied alone (first of its lane), or after the group (a
            // message repeated in the group is found applied then).
            None => {
                stopped.insert(key);
                parts.push(if first { Part::Alone } else { Part::Back });
            }
        }
    }
    // Every message taken, not only the members: those applied alone after
    // the group, and those going back to their lanes, are held meanwhile
    // too, out of their lanes (where the fetch loop keeps messages alive).
    let replies: Vec<Option<async_nats::Subject>> = taken
        .iter()
        .map(|(_, job)| job.item.message.reply.clone())
        .collect();
    let outcomes = if members.is_empty() {
        Vec::new()
    } else {
        let applying = group_apply::apply_group(shared, &groups.inbox, &members);
        match keep_alive_while(groups, &replies, applying).await {
            Some(outcomes) => outcomes,
            None => {
                // The shutdown deadline passed: the group is dropped (its
                // transaction rolls back) and every message handed back.
                drop(members);
                for (_, job) in &taken {
                    settle::abandon(shared, &job.item, UNKNOWN_EVENT).await;
                }
                return Vec::new();
            }
        }
    };
    let mut outcomes: Vec<Option<MemberOutcome>> = outcomes.into_iter().map(Some).collect();
    let mut back = vec![false; taken.len()];
    for (i, ((key, job), part)) in taken.iter().zip(&parts).enumerate() {
        let index = match part {
            Part::Member(index) => *index,
            Part::Back => {
                back[i] = true;
                continue;
            }
            Part::Alone => continue,
        };
        let member = &members[index];
        match outcomes[index].take() {
            Some(MemberOutcome::Settle(verdict)) => {
                // A dead message whose hold cannot be recorded waits,
                // unsettled, for the store (see `holding::hold_if_dead`).
                if let Err(reason) =
                    holding::hold_if_dead(shared, &verdict, &member.delivered, key).await
                {
                    shared.pause.pause(&reason);
                    back[i] = true;
                    continue;
                }
                // Marked away before the nak, so that its redelivery finds
                // it so and what follows it waits for it.
                if let Decision::Retry { delay, .. } = &verdict.decision {
                    groups.lanes.send_away(key, job.sequence, *delay);
                }
                settle::settle(shared, &job.item, verdict, &member.span).await;
            }
            Some(MemberOutcome::PutBack) | None => back[i] = true,
        }
    }
    drop(members);
    let mut alone = Vec::new();
    for ((entry, part), back) in taken.into_iter().zip(parts).zip(back) {
        if back {
            let (key, job) = entry;
            groups.lanes.put_back(&key, job);
        } else if matches!(part, Part::Alone) {
            alone.push(entry);
        }
        // Otherwise settled: dropped here, no longer held.
    }
    shared.report_in_flight();
    alone
}

/// Runs `applying`, keeping the group's messages alive with progress acks
/// meanwhile; `None` when the shutdown deadline passed first.
async fn keep_alive_while<F: std::future::Future>(
    groups: &Groups,
    replies: &[Option<async_nats::Subject>],
    applying: F,
) -> Option<F::Output> {
    let period = groups.shared.progress_interval();
    let mut progress = interval_at(Instant::now() + period, period);
    progress.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tokio::pin!(applying);
    loop {
        tokio::select! {
            biased;
            outcomes = &mut applying => return Some(outcomes),
            () = groups.stop.hard.cancelled() => return None,
            _ = progress.tick() => {
                for reply in replies {
                    settle::progress(&groups.shared, reply.clone()).await;
                }
            }
        }
    }
}
