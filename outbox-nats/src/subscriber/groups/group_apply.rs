//! Applying a group of messages in one inbox transaction (see
//! [`InboxGroups`](crate::subscriber::InboxGroups)): which messages may join a
//! group, the attempts that drop a failing aggregate, and what becomes of
//! each message. Independent of JetStream: the inbox groups of the running
//! subscriber ([`grouping`](super::grouping)) and the in-process harness
//! settle the outcomes each their own way.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;
use tracing::{Instrument, Span};
use txoutbox_core::consumer::{
    ConsumerInbox, FailureCause, GroupEntry, GroupHandlerFuture, InboxGroup,
};
use txoutbox_core::{DecodeError, ErrorChain, HandlerError, OutboxMessage, wire};

use crate::subscriber::lanes::LaneKey;
use crate::subscriber::lanes::dispatch::{self, Decision, Delivered, Verdict};
use crate::subscriber::setup::Shared;

/// One message of a group.
pub(crate) struct GroupMember<'a> {
    /// Its aggregate's lane.
    pub(crate) key: LaneKey,
    /// The message as delivered.
    pub(crate) delivered: Delivered<'a>,
    /// Its envelope (see [`joins_group`]).
    pub(crate) envelope: OutboxMessage,
    /// Its `outbox.consume` span.
    pub(crate) span: Span,
}

/// What becomes of one message of a group.
pub(crate) enum MemberOutcome {
    /// Settle it so (an ack only once its group committed).
    Settle(Verdict),
    /// Not applied: an earlier message of its aggregate failed. It goes
    /// back to its lane, behind that one.
    PutBack,
}

/// The envelope of `delivered`, when the message may join a group: a
/// first delivery (a message delivered again is applied alone, so one
/// whose effects fail only at commit fails alone), of a handler that
/// applies in groups, of an aggregate that is not held. Records the
/// envelope in `span`.
pub(crate) fn joins_group(
    shared: &Shared,
    delivered: &Delivered<'_>,
    key: &LaneKey,
    span: &Span,
) -> Option<OutboxMessage> {
    if delivered.deliveries > 1
        || shared
            .holds
            .as_ref()
            .is_some_and(|holds| holds.is_held(key))
    {
        return None;
    }
    let envelope = wire::decode(
        delivered.subject,
        delivered.headers.iter().copied(),
        delivered.payload,
    )
    .ok()?;
    let handler = shared.handlers.get(&envelope.event_name)?;
    if !handler.applies_in_group() {
        return None;
    }
    dispatch::record(span, &envelope);
    Some(envelope)
}

/// How one attempt at the group ended.
enum Attempt {
    /// Committed: every message applied (or found a duplicate).
    Committed,
    /// Member `index`'s handler failed (nothing of the attempt is kept).
    HandlerFailed { index: usize, verdict: Verdict },
    /// A batch handler failed on these members together (nothing of the
    /// attempt is kept): which of them is at fault is not known yet.
    BatchFailed { indices: Vec<usize>, reason: String },
    /// The group could not begin, record or commit.
    GroupFailed { reason: String },
    /// The database failed the attempt through nobody's fault (it is away,
    /// or other transactions were in the way): nothing of it is kept, no
    /// delivery is spent.
    Interrupted { cause: FailureCause, reason: String },
}

/// Attempts run again at once after a conflict (a deadlock, a
/// serialization failure) before the group goes back to its lanes.
const CONFLICT_ATTEMPTS: u32 = 5;

/// Applies `members` (distinct message ids; each aggregate's members in
/// stream order) in one transaction of `inbox`, again without a failing
/// message and its aggregate's later members as long as one fails;
/// returns what becomes of each member, in order.
pub(crate) async fn apply_group(
    shared: &Shared,
    inbox: &Arc<dyn ConsumerInbox>,
    members: &[GroupMember<'_>],
) -> Vec<MemberOutcome> {
    let mut outcomes: Vec<Option<MemberOutcome>> = members.iter().map(|_| None).collect();
    // Members of a failed batch, applied one by one from then on.
    let mut singles: HashSet<usize> = HashSet::new();
    let mut conflicts = 0;
    loop {
        let live: Vec<usize> = (0..members.len())
            .filter(|&i| outcomes[i].is_none())
            .collect();
        if live.is_empty() {
            break;
        }
        match attempt(shared, inbox, members, &live, &singles).await {
            Attempt::Committed => {
                for i in live {
                    let event = event_of(shared, &members[i]);
                    outcomes[i] = Some(MemberOutcome::Settle(dispatch::handled(event)));
                }
                break;
            }
            Attempt::HandlerFailed { index, verdict } => {
                let key = &members[index].key;
                tracing::debug!(consumer = %shared.consumer, group = live.len(), "a handler of an inbox group failed: the group is applied again without its aggregate");
                for &i in live
                    .iter()
                    .filter(|&&i| i > index && members[i].key == *key)
                {
                    outcomes[i] = Some(MemberOutcome::PutBack);
                }
                outcomes[index] = Some(MemberOutcome::Settle(verdict));
            }
            Attempt::BatchFailed { indices, reason } => {
                tracing::debug!(consumer = %shared.consumer, batch = indices.len(), error = %reason, "a batch handler of an inbox group failed: the group is applied again with the batch's messages one by one");
                singles.extend(indices);
            }
            Attempt::Interrupted { cause, reason } => {
                shared.pause.interrupted(cause, &reason).await;
                if cause == FailureCause::Conflict && conflicts < CONFLICT_ATTEMPTS {
                    conflicts += 1;
                    continue;
                }
                if cause == FailureCause::Conflict {
                    // Still in conflict: back to the lanes for a moment.
                    shared.pause.pause(&reason);
                }
                // Every member not settled goes back to its lane,
                // unsettled, and is applied again after the pause.
                break;
            }
            Attempt::GroupFailed { reason } => {
                tracing::warn!(consumer = %shared.consumer, group = live.len(), error = %reason, "an inbox group failed: the first message of each of its aggregates is delivered again, the rest wait for it");
                let mut seen: Vec<&LaneKey> = Vec::new();
                for i in live {
                    let member = &members[i];
                    outcomes[i] = Some(if seen.contains(&&member.key) {
                        MemberOutcome::PutBack
                    } else {
                        seen.push(&member.key);
                        let event = event_of(shared, member);
                        MemberOutcome::Settle(dispatch::failed(
                            shared,
                            member.delivered.deliveries,
                            event,
                            reason.clone(),
                        ))
                    });
                }
                break;
            }
        }
    }
    outcomes
        .into_iter()
        .map(|outcome| outcome.unwrap_or(MemberOutcome::PutBack))
        .collect()
}

/// The `event` label of a member's metrics: its handler's event name.
fn event_of(shared: &Shared, member: &GroupMember<'_>) -> &'static str {
    shared
        .handlers
        .get(&member.envelope.event_name)
        .map_or(crate::subscriber::health::UNKNOWN_EVENT, |handler| {
            handler.registration().name()
        })
}

/// One step of an attempt: a handler called for one member, or a batch
/// handler for several.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    One(usize),
    Batch(Vec<usize>),
}

/// The order in which an attempt runs `runnable` (member indices, in
/// stream order). Without a batch handler among them: one by one, in
/// stream order. With one: in rounds, round `n` holding each aggregate's
/// `n`-th message, so each aggregate's messages still run in stream order,
/// one round after the other; within a round each batch handler takes all
/// its messages at once (each aggregate at most once), the other handlers
/// one by one. Member `i`'s aggregate is `key(i)`, its event `event(i)`;
/// `batches(i)`: whether it goes to a batch handler.
fn steps<K: Eq + Hash, N: PartialEq>(
    runnable: &[usize],
    key: impl Fn(usize) -> K,
    event: impl Fn(usize) -> N,
    batches: impl Fn(usize) -> bool,
) -> Vec<Step> {
    if !runnable.iter().any(|&i| batches(i)) {
        return runnable.iter().map(|&i| Step::One(i)).collect();
    }
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    let mut depth: HashMap<K, usize> = HashMap::new();
    for &i in runnable {
        let round = depth.entry(key(i)).or_default();
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(i);
        *round += 1;
    }
    let mut steps = Vec::with_capacity(runnable.len());
    for round in rounds {
        let mut by_event: Vec<(N, Vec<usize>)> = Vec::new();
        for i in round {
            if !batches(i) {
                steps.push(Step::One(i));
                continue;
            }
            let name = event(i);
            match by_event.iter_mut().find(|(other, _)| *other == name) {
                Some((_, batch)) => batch.push(i),
                None => by_event.push((name, vec![i])),
            }
        }
        for (_, batch) in by_event {
            steps.push(match batch.as_slice() {
                [one] => Step::One(*one),
                _ => Step::Batch(batch),
            });
        }
    }
    steps
}

/// One transaction: the inbox rows of `live`, their handlers (in
/// [`steps`]; the members of `singles` one by one), the commit.
async fn attempt(
    shared: &Shared,
    inbox: &Arc<dyn ConsumerInbox>,
    members: &[GroupMember<'_>],
    live: &[usize],
    singles: &HashSet<usize>,
) -> Attempt {
    let failed = |what: &str, err: &(dyn std::error::Error + 'static)| {
        let reason = format!("{what}: {}", ErrorChain(err));
        match shared.cause_of_error(err) {
            cause if cause.spends_no_delivery() => Attempt::Interrupted { cause, reason },
            _ => Attempt::GroupFailed { reason },
        }
    };
    let Some(beginning) = inbox.begin_group() else {
        return Attempt::GroupFailed {
            reason: "the inbox cannot apply messages in groups".into(),
        };
    };
    let mut group: Box<dyn InboxGroup> = match beginning.await {
        Ok(group) => group,
        Err(err) => return failed("beginning the group's transaction", &*err),
    };
    let entries = live
        .iter()
        .map(|&i| GroupEntry {
            message_id: members[i].envelope.id,
            event_name: members[i].envelope.event_name.clone(),
        })
        .collect();
    let new = match group.record(entries).await {
        Ok(new) => new,
        Err(err) => return failed("recording the group in the inbox", &*err),
    };
    // Duplicates are acknowledged with the group, not run.
    let runnable: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&i| new.contains(&members[i].envelope.id))
        .collect();
    let batches = |i: usize| {
        !singles.contains(&i)
            && shared
                .handlers
                .get(&members[i].envelope.event_name)
                .is_some_and(|handler| handler.applies_in_batches())
    };
    let key = |i: usize| &members[i].key;
    let event = |i: usize| members[i].envelope.event_name.as_str();
    for step in steps(&runnable, key, event, batches) {
        let ran = match step {
            Step::One(index) => run_one(shared, members, index, &mut *group).await,
            Step::Batch(indices) => run_batch(shared, members, indices, &mut *group).await,
        };
        if let Err(failure) = ran {
            return failure;
        }
    }
    match group.commit().await {
        Ok(()) => Attempt::Committed,
        Err(err) => failed("committing the group", &*err),
    }
}

/// Runs member `index`'s handler in `group`.
async fn run_one(
    shared: &Shared,
    members: &[GroupMember<'_>],
    index: usize,
    group: &mut dyn InboxGroup,
) -> Result<(), Attempt> {
    let member = &members[index];
    let Some(handler) = shared.handlers.get(&member.envelope.event_name) else {
        return Ok(()); // `joins_group` found one
    };
    let event = handler.registration().name();
    let delivery = dispatch::delivery_of(shared, member.envelope.clone(), &member.delivered);
    let started = Instant::now();
    let calling = || handler.call_in_group(&shared.registry, delivery, group);
    let result = match caught(calling, member.span.clone()).await {
        Ok(result) => result,
        Err(err) => return Err(undecodable(index, event, &err)),
    };
    dispatch::record_duration(shared, event, started);
    let verdict = dispatch::verdict_of(shared, member.delivered.deliveries, event, result);
    match verdict.decision {
        Decision::Ack { .. } => Ok(()),
        Decision::Wait { cause, reason } => Err(Attempt::Interrupted { cause, reason }),
        _ => Err(Attempt::HandlerFailed { index, verdict }),
    }
}

/// Runs the batch handler of `indices` (members of one event type, of
/// distinct aggregates) once for all of them in `group`.
async fn run_batch(
    shared: &Shared,
    members: &[GroupMember<'_>],
    indices: Vec<usize>,
    group: &mut dyn InboxGroup,
) -> Result<(), Attempt> {
    let Some(handler) = shared
        .handlers
        .get(&members[indices[0]].envelope.event_name)
    else {
        return Ok(()); // `joins_group` found one
    };
    let event = handler.registration().name();
    let deliveries = indices
        .iter()
        .map(|&i| dispatch::delivery_of(shared, members[i].envelope.clone(), &members[i].delivered))
        .collect();
    let span = tracing::info_span!("outbox.consume_batch", consumer = %shared.consumer, event, messages = indices.len());
    let started = Instant::now();
    let calling = || handler.call_batch_in_group(&shared.registry, deliveries, group);
    let result = match caught(calling, span).await {
        Ok(result) => result,
        Err((position, err)) => return Err(undecodable(indices[position], event, &err)),
    };
    dispatch::record_duration(shared, event, started);
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) => Err(match shared.cause_of(&err) {
            cause if cause.spends_no_delivery() => Attempt::Interrupted {
                cause,
                reason: err.to_string(),
            },
            _ => Attempt::BatchFailed {
                indices,
                reason: err.to_string(),
            },
        }),
        Err(panic) => Err(Attempt::BatchFailed {
            indices,
            reason: format!("handler panicked: {}", dispatch::panic_message(&*panic)),
        }),
    }
}

/// Starts a handler (`start`) and runs it in `span`, catching a panic
/// while it creates its future or while it runs; the error `start` gives
/// when the handler could not start (a message that cannot be decoded).
async fn caught<'a, E>(
    start: impl FnOnce() -> Result<GroupHandlerFuture<'a>, E>,
    span: Span,
) -> Result<std::thread::Result<Result<(), HandlerError>>, E> {
    match std::panic::catch_unwind(AssertUnwindSafe(start)) {
        Ok(Ok(running)) => Ok(AssertUnwindSafe(running)
            .catch_unwind()
            .instrument(span)
            .await),
        Ok(Err(err)) => Err(err),
        Err(panic) => Ok(Err(panic)),
    }
}

/// Member `index`'s message cannot be decoded: it is dead-lettered.
fn undecodable(index: usize, event: &'static str, err: &DecodeError) -> Attempt {
    let reason = ErrorChain(err).to_string();
    let verdict = dispatch::dead(dispatch::decode_kind(err), reason, Some(event));
    Attempt::HandlerFailed { index, verdict }
}

#[cfg(test)]
mod tests {
    use super::{Step, steps};

    /// Members as (aggregate, event), in stream order; batch handlers for
    /// the events named in `batched`.
    fn plan(members: &[(&str, &str)], batched: &[&str]) -> Vec<Step> {
        let runnable: Vec<usize> = (0..members.len()).collect();
        steps(
            &runnable,
            |i| members[i].0,
            |i| members[i].1,
            |i| batched.contains(&members[i].1),
        )
    }

    #[test]
    fn without_batch_handlers_members_run_one_by_one_in_stream_order() {
        let members = [("a", "paid"), ("b", "paid"), ("a", "shipped")];
        let plan = plan(&members, &[]);
        assert_eq!(plan, vec![Step::One(0), Step::One(1), Step::One(2)]);
    }

    #[test]
    fn a_batch_takes_each_aggregate_once_and_its_next_message_runs_after() {
        // a: paid, shipped, paid; b: paid; c: shipped.
        let members = [
            ("a", "paid"),
            ("b", "paid"),
            ("a", "shipped"),
            ("c", "shipped"),
            ("a", "paid"),
        ];
        let plan = plan(&members, &["paid", "shipped"]);
        assert_eq!(
            plan,
            vec![
                Step::Batch(vec![0, 1]), // round 1: a's and b's first
                Step::One(3),            // round 1: c's first
                Step::One(2),            // round 2: a's second
                Step::One(4),            // round 3: a's third
            ]
        );
    }

    #[test]
    fn handlers_without_batches_run_alone_within_their_round() {
        let members = [("a", "paid"), ("b", "note"), ("c", "paid"), ("b", "paid")];
        let plan = plan(&members, &["paid"]);
        assert_eq!(
            plan,
            vec![Step::One(1), Step::Batch(vec![0, 2]), Step::One(3)]
        );
    }
}
