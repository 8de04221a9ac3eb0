//! Applying a group of messages in one inbox transaction (see
//! [`InboxBatches`](super::InboxBatches)): which messages may join a
//! group, the attempts that drop a failing aggregate, and what becomes of
//! each message. Independent of JetStream: the inbox groups of the running
//! subscriber ([`grouping`](super::grouping)) and the in-process harness
//! settle the outcomes each their own way.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;
use tracing::{Instrument, Span};
use txoutbox_core::consumer::{ConsumerInbox, GroupEntry, InboxGroup};
use txoutbox_core::{ErrorChain, OutboxMessage, wire};

use super::dispatch::{self, Delivered, Verdict};
use super::ordering::LaneKey;
use super::shared::Shared;

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
    /// The group could not begin, record or commit.
    GroupFailed { reason: String },
}

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
    loop {
        let live: Vec<usize> = (0..members.len())
            .filter(|&i| outcomes[i].is_none())
            .collect();
        if live.is_empty() {
            break;
        }
        match attempt(shared, inbox, members, &live).await {
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
        .map_or(super::metrics::UNKNOWN_EVENT, |handler| {
            handler.registration().name()
        })
}

/// One transaction: the inbox rows of `live`, their handlers in order,
/// the commit.
async fn attempt(
    shared: &Shared,
    inbox: &Arc<dyn ConsumerInbox>,
    members: &[GroupMember<'_>],
    live: &[usize],
) -> Attempt {
    let failed = |what: &str, err: &(dyn std::error::Error + 'static)| Attempt::GroupFailed {
        reason: format!("{what}: {}", ErrorChain(err)),
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
    for &index in live {
        let member = &members[index];
        if !new.contains(&member.envelope.id) {
            continue; // a duplicate: acknowledged with the group, not run
        }
        let Some(handler) = shared.handlers.get(&member.envelope.event_name) else {
            continue; // `joins_group` found one
        };
        let event = handler.registration().name();
        let delivery = dispatch::delivery_of(shared, member.envelope.clone(), &member.delivered);
        let started = Instant::now();
        // A handler may panic while creating its future, or while it runs.
        let calling = std::panic::catch_unwind(AssertUnwindSafe(|| {
            handler.call_in_group(&shared.registry, delivery, &mut *group)
        }));
        let result = match calling {
            Ok(Ok(running)) => {
                AssertUnwindSafe(running)
                    .catch_unwind()
                    .instrument(member.span.clone())
                    .await
            }
            Ok(Err(err)) => {
                let reason = ErrorChain(&err).to_string();
                let kind = dispatch::decode_kind(&err);
                let verdict = dispatch::dead(kind, reason, Some(event));
                return Attempt::HandlerFailed { index, verdict };
            }
            Err(panic) => Err(panic),
        };
        dispatch::record_duration(shared, event, started);
        let verdict = dispatch::verdict_of(shared, member.delivered.deliveries, event, result);
        if !verdict.is_ack() {
            return Attempt::HandlerFailed { index, verdict };
        }
    }
    match group.commit().await {
        Ok(()) => Attempt::Committed,
        Err(err) => failed("committing the group", &*err),
    }
}
