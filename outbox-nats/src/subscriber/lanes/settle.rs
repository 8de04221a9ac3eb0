//! Acting on a decision: ack, nak with a delay, or dead-letter.

use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use tracing::Span;

use super::dispatch::{Decision, Incoming, Verdict};
use crate::subscriber::dead_letters::policy::{self, DeadLetterKind, Origin};
use crate::subscriber::health::{ACK_FAILURES_TOTAL, HANDLED_TOTAL, UNKNOWN_EVENT};
use crate::subscriber::setup::Shared;

/// Settles a message as `verdict` says and counts the outcome.
pub(crate) async fn settle(shared: &Shared, incoming: &Incoming, verdict: Verdict, span: &Span) {
    let (ack, outcome) = match verdict.decision {
        Decision::Ack { outcome } => (AckKind::Ack, outcome.label()),
        Decision::Retry { delay, reason } => {
            tracing::warn!(
                parent: span,
                error = %reason,
                retry_in = ?delay,
                "handler failed; the message will be delivered again"
            );
            (nak(delay), "retried")
        }
        Decision::Dead { kind, reason } => dead(shared, incoming, kind, &reason, span).await,
        // Callers put such a message back in its lane instead; should one
        // come here, it is delivered again at once, not lost.
        Decision::Wait { reason, .. } => {
            tracing::warn!(parent: span, error = %reason, "handing the message back");
            (AckKind::Nak(None), "abandoned")
        }
    };
    send(shared, &incoming.message, ack).await;
    count(shared, verdict.event, outcome);
    span.record("outcome", outcome);
}

fn nak(delay: Duration) -> AckKind {
    AckKind::Nak(Some(delay))
}

/// Hands a message back without handling it (shutdown): redelivered at once.
pub(crate) async fn abandon(shared: &Shared, incoming: &Incoming, event: &'static str) {
    send(shared, &incoming.message, AckKind::Nak(None)).await;
    count(shared, event, "abandoned");
}

/// Settles a message whose JetStream metadata (stream sequence, delivery
/// count, from its reply subject) cannot be read: it is terminated, logged
/// at error level and counted (`outcome="invalid_metadata"`), never left to
/// hang until its ack wait.
///
/// Why terminate rather than nak or dead-letter: without a stream sequence
/// the message cannot be put in its aggregate's order, nor its deliveries
/// counted, so no later delivery would go better and a nak would loop it
/// until `max_deliver`; and a dead-letter copy needs the stream sequence it
/// came from. Every real JetStream delivery has a `$JS.ACK` reply subject
/// this client reads, so this is a message published into the
/// subscriber's pull inbox by something else, or a server speaking a format
/// this client does not know; either way it stays in the stream (for
/// JetStream messages), and the log names its subject and reply subject.
/// One without any reply subject cannot be answered: it is only logged and
/// counted.
pub(crate) async fn unreadable(shared: &Shared, message: &jetstream::Message, error: &str) {
    if message.reply.is_none() {
        tracing::warn!(
            consumer = %shared.consumer,
            subject = %message.subject,
            %error,
            "a message without a reply subject arrived on the pull inbox; ignored"
        );
    } else {
        tracing::error!(
            consumer = %shared.consumer,
            subject = %message.subject,
            reply = ?message.reply,
            %error,
            "the JetStream metadata of a message cannot be read; terminating it"
        );
        send(shared, message, AckKind::Term).await;
    }
    count(shared, UNKNOWN_EVENT, "invalid_metadata");
}

async fn dead(
    shared: &Shared,
    incoming: &Incoming,
    kind: DeadLetterKind,
    reason: &str,
    span: &Span,
) -> (AckKind, &'static str) {
    let retry_later = nak(shared.backoff.jittered_delay(incoming.deliveries));
    if let Some(subject) = shared.dead_letter.subject(&shared.consumer) {
        let origin = Origin {
            consumer: &shared.consumer,
            stream: &shared.stream,
            stream_sequence: incoming.stream_sequence,
            deliveries: incoming.deliveries,
        };
        let published = policy::publish(
            &shared.context,
            &subject,
            &incoming.message,
            kind,
            reason,
            &origin,
        )
        .await;
        match published {
            Ok(()) => {
                tracing::error!(parent: span, %kind, %reason, dead_letter_subject = %subject, "message dead-lettered");
                (AckKind::Term, "dead_lettered")
            }
            Err(err) => {
                tracing::error!(
                    parent: span,
                    %kind,
                    %reason,
                    dead_letter_subject = %subject,
                    error = %err,
                    last_delivery = incoming.deliveries >= shared.max_deliver,
                    "dead-letter publish failed; the message is nakked, not terminated \
                     (on its last delivery it stays in the stream, undelivered)"
                );
                (retry_later, "dead_letter_failed")
            }
        }
    } else if shared.dead_letter.redelivers() {
        tracing::warn!(parent: span, %kind, %reason, "message cannot be handled; redelivering later");
        (retry_later, "redelivered")
    } else {
        tracing::error!(parent: span, %kind, %reason, "message cannot be handled; terminated");
        (AckKind::Term, "terminated")
    }
}

/// Tells JetStream the message is still being worked on (`+WPI`), which
/// restarts its ack wait.
pub(crate) async fn progress(shared: &Shared, reply: Option<async_nats::Subject>) {
    if let Some(reply) = reply
        && let Err(err) = shared.client.publish(reply, "+WPI".into()).await
    {
        tracing::debug!(error = %txoutbox_core::ErrorChain(&err), "progress ack not sent");
    }
}

async fn send(shared: &Shared, message: &jetstream::Message, ack: AckKind) {
    if let Err(err) = message.ack_with(ack).await {
        tracing::warn!(error = %txoutbox_core::ErrorChain(&*err), ?ack, "could not settle the message; JetStream will redeliver it");
        ::metrics::counter!(ACK_FAILURES_TOTAL, "consumer" => std::sync::Arc::clone(&shared.consumer)).increment(1);
    }
}

fn count(shared: &Shared, event: &'static str, outcome: &'static str) {
    ::metrics::counter!(
        HANDLED_TOTAL,
        "consumer" => std::sync::Arc::clone(&shared.consumer),
        "event" => event,
        "outcome" => outcome,
    )
    .increment(1);
}
