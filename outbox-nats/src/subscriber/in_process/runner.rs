//! A subscriber run in this process, without JetStream: what the testing
//! kit's `TestSubscriber` (`txoutbox_testing`, feature `nats`) drives. The
//! builder's checks ([`SubscriberBuilder::into_in_process`]), the decision
//! per message ([`dispatch`](crate::subscriber::lanes::dispatch): decode, upcasts, handler,
//! retries, dead letters), the hold logic ([`holding`](crate::subscriber::holds::holding):
//! parks behind a held aggregate, holds behind a dead message) and the
//! application of released holds ([`release`](crate::subscriber::holds::release)) and of
//! inbox groups ([`group_apply`](crate::subscriber::groups::group_apply), one message per
//! group here) are the subscriber's own; what is left out is JetStream's part: fetching, acks
//! and naks, the dead-letter copy, progress acks, lanes across concurrent
//! handlers, the restart guard.
//!
//! Public only as the `#[doc(hidden)]` `subscriber::__in_process`: outside
//! semver, it may change in any release.
//!
//! [`SubscriberBuilder::into_in_process`]: crate::subscriber::SubscriberBuilder::into_in_process

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use txoutbox_core::consumer::{BoxError, ConsumerInbox, ParkedMessage, Unpark};

use crate::subscriber::dead_letters::DeadLetterKind;
use crate::subscriber::groups::group_apply::{self, GroupMember, MemberOutcome};
use crate::subscriber::holds::holding;
use crate::subscriber::holds::release;
use crate::subscriber::lanes::dispatch::{self, Acked, Decision, Delivered, Verdict};
use crate::subscriber::lanes::lane_of;
use crate::subscriber::setup::Shared;

/// A checked subscriber that handles the messages it is given, one at a
/// time, as its lane workers would, and settles them as it would on
/// JetStream, in memory.
pub struct InProcess {
    shared: Arc<Shared>,
    inbox: Option<Arc<dyn ConsumerInbox>>,
}

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess")
            .field("consumer", &self.shared.consumer)
            .field("stream", &self.shared.stream)
            .finish_non_exhaustive()
    }
}

/// One delivery of a message, as JetStream would hand it over.
#[derive(Debug, Clone, Copy)]
pub struct InProcessMessage<'a> {
    /// The subject it was published on.
    pub subject: &'a str,
    /// Its headers (the envelope's, `txoutbox_core::wire::encode`).
    pub headers: &'a [(&'a str, &'a str)],
    /// Its payload.
    pub payload: &'a [u8],
    /// Its stream sequence.
    pub stream_sequence: u64,
    /// How many times it was delivered, this time included (from 1).
    pub deliveries: u64,
}

/// What the subscriber decided for one delivery. Exhaustive (a hidden API):
/// the testing kit's match breaks when an outcome is added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InProcessOutcome {
    /// Acked, and why.
    Acked(Acked),
    /// Nakked, to be delivered again after `delay`.
    Retried {
        /// The backoff delay for this delivery count.
        delay: Duration,
        /// The handler's error.
        reason: String,
    },
    /// It can never be handled here: a copy published to `subject` (the
    /// [`DeadLetterPolicy`](crate::subscriber::DeadLetterPolicy)'s), or with
    /// `DeadLetterPolicy::terminate` (`subject` `None`) terminated. With
    /// `DeadLetterPolicy::redeliver` the outcome is
    /// [`Retried`](Self::Retried) instead, as the nak it is.
    Dead {
        /// Why, as the dead letter's `Outbox-Dead-Kind` header says.
        kind: DeadLetterKind,
        /// Why, in words.
        reason: String,
        /// Whether its aggregate was held behind it (the subscriber keeps
        /// order and the kind holds an aggregate).
        held: bool,
        /// Where the copy is published, if the policy publishes one.
        subject: Option<String>,
    },
    /// Not the message's fault (its inbox's database is away, or other
    /// transactions were in the way): not settled, no delivery spent; the
    /// running subscriber keeps it and applies it again (after a pause,
    /// for an outage).
    Interrupted {
        /// The database's error.
        reason: String,
    },
}

impl InProcess {
    pub(crate) fn new(shared: Arc<Shared>, inbox: Option<Arc<dyn ConsumerInbox>>) -> Self {
        Self { shared, inbox }
    }

    /// The durable consumer's name.
    pub fn durable(&self) -> &str {
        &self.shared.consumer
    }

    /// The stream it reads.
    pub fn stream(&self) -> &str {
        &self.shared.stream
    }

    /// JetStream's delivery limit.
    pub fn max_deliver(&self) -> u64 {
        self.shared.max_deliver
    }

    /// Where dead letters are published, if the policy publishes them.
    pub fn dead_letter_subject(&self) -> Option<String> {
        self.shared.dead_letter.subject(&self.shared.consumer)
    }

    /// Whether it keeps order with its inbox (restart guard, holds).
    pub fn keeps_order(&self) -> bool {
        self.shared.holds.is_some()
    }

    /// The inbox its handlers apply through, if any.
    pub fn inbox(&self) -> Option<Arc<dyn ConsumerInbox>> {
        self.inbox.clone()
    }

    /// Reads the held aggregates from the inbox, as a subscriber does when
    /// it starts (before its first message).
    pub async fn refresh_holds(&self) -> Result<(), BoxError> {
        match &self.shared.holds {
            Some(holds) => holds.refresh(&self.shared.consumer).await.map(drop),
            None => Ok(()),
        }
    }

    /// Handles one delivery as a lane worker does: parked if its aggregate
    /// is held, else decided (its handler run), and a dead message that
    /// holds its aggregate parked with the aggregate held behind it.
    pub async fn deliver(&self, message: InProcessMessage<'_>) -> InProcessOutcome {
        let shared = &self.shared;
        let delivered = Delivered {
            subject: message.subject,
            headers: message.headers.to_vec(),
            payload: message.payload,
            stream_sequence: message.stream_sequence,
            deliveries: message.deliveries,
        };
        let key = lane_of(&delivered.headers, delivered.stream_sequence);
        let span = dispatch::consume_span(
            &shared.consumer,
            message.stream_sequence,
            message.deliveries,
        );
        if let Some(parked) = holding::park_if_held(shared, &delivered, &key).await {
            return outcome(shared, parked, false, &delivered, &span);
        }
        if let Some((inbox, _)) = &shared.inbox_groups
            && let Some(envelope) = group_apply::joins_group(shared, &delivered, &key, &span)
        {
            // As the running subscriber applies it: in an inbox group (of
            // one message here).
            let member = GroupMember {
                key: key.clone(),
                delivered,
                envelope,
                span: span.clone(),
            };
            let applied = group_apply::apply_group(shared, inbox, std::slice::from_ref(&member))
                .await
                .pop();
            let verdict = match applied {
                Some(MemberOutcome::Settle(verdict)) => verdict,
                // Only a message behind a failed one in its group, or one
                // whose group was interrupted (the database away), is put
                // back; a group of one has none of the first.
                Some(MemberOutcome::PutBack) | None => interrupted(shared),
            };
            return held_and_settled(shared, verdict, &member.delivered, &key, &span).await;
        }
        let verdict = dispatch::decide_delivered(shared, &delivered, &span)
            .instrument(span.clone())
            .await;
        held_and_settled(shared, verdict, &delivered, &key, &span).await
    }

    /// Reads the holds and applies what is parked behind released ones, in
    /// order, as the running subscriber does every second: what an
    /// operator's `Inbox::release` leads to. Returns the parked messages it
    /// settled, and how.
    pub async fn apply_releases(&self) -> Result<Vec<(ParkedMessage, Unpark)>, BoxError> {
        match &self.shared.holds {
            Some(holds) => {
                release::apply_releases(&self.shared, holds, &CancellationToken::new()).await
            }
            None => Ok(Vec::new()),
        }
    }
}

/// What a running subscriber does after a verdict: a dead message that
/// holds its aggregate holds it (or, when the hold cannot be recorded,
/// waits), then the verdict is settled.
async fn held_and_settled(
    shared: &Shared,
    verdict: Verdict,
    delivered: &Delivered<'_>,
    key: &crate::subscriber::lanes::LaneKey,
    span: &tracing::Span,
) -> InProcessOutcome {
    match holding::hold_if_dead(shared, &verdict, delivered, key).await {
        Ok(held) => outcome(shared, verdict, held, delivered, span),
        Err(reason) => {
            let waits = Verdict {
                decision: Decision::Wait {
                    cause: txoutbox_core::consumer::FailureCause::Unavailable,
                    reason,
                },
                event: verdict.event,
            };
            outcome(shared, waits, false, delivered, span)
        }
    }
}

/// The verdict of a message whose group was interrupted: why the
/// subscriber paused, if it did.
fn interrupted(shared: &Shared) -> Verdict {
    let reason = shared.pause.paused().map_or_else(
        || "its inbox group was interrupted by a conflict".to_owned(),
        |(_, reason)| reason,
    );
    Verdict {
        decision: Decision::Wait {
            cause: txoutbox_core::consumer::FailureCause::Unavailable,
            reason,
        },
        event: crate::subscriber::health::UNKNOWN_EVENT,
    }
}

/// The verdict as an outcome, settled as `settle::settle` settles it on
/// JetStream (the dead-letter copy as published, which in memory cannot
/// fail) and recorded on the span with the same `outcome` label.
fn outcome(
    shared: &Shared,
    verdict: Verdict,
    held: bool,
    delivered: &Delivered<'_>,
    span: &tracing::Span,
) -> InProcessOutcome {
    let (outcome, label) = match verdict.decision {
        Decision::Ack { outcome } => (InProcessOutcome::Acked(outcome), outcome.label()),
        Decision::Retry { delay, reason } => {
            tracing::warn!(parent: span, error = %reason, retry_in = ?delay, "handler failed; the message will be delivered again");
            (InProcessOutcome::Retried { delay, reason }, "retried")
        }
        Decision::Wait { reason, .. } => {
            tracing::warn!(parent: span, error = %reason, "not the message's fault: kept, no delivery spent");
            (InProcessOutcome::Interrupted { reason }, "interrupted")
        }
        Decision::Dead { kind, reason } => {
            let subject = shared.dead_letter.subject(&shared.consumer);
            if subject.is_some() {
                tracing::error!(parent: span, %kind, %reason, dead_letter_subject = ?subject, "message dead-lettered");
                let dead = InProcessOutcome::Dead {
                    kind,
                    reason,
                    held,
                    subject,
                };
                (dead, "dead_lettered")
            } else if shared.dead_letter.redelivers() {
                tracing::warn!(parent: span, %kind, %reason, "message cannot be handled; redelivering later");
                let delay = shared.backoff.jittered_delay(delivered.deliveries);
                let reason = format!("{kind}: {reason}");
                (InProcessOutcome::Retried { delay, reason }, "redelivered")
            } else {
                tracing::error!(parent: span, %kind, %reason, "message cannot be handled; terminated");
                let dead = InProcessOutcome::Dead {
                    kind,
                    reason,
                    held,
                    subject,
                };
                (dead, "terminated")
            }
        }
    };
    span.record("outcome", label);
    outcome
}
