//! What the processor needs from a broker: the [`Publisher`] trait.
//!
//! Implemented for NATS JetStream by `outbox-nats`. A publisher sends one
//! message and resolves when the broker has acknowledged storing it; the
//! processor calls it concurrently for messages of different aggregates, so
//! acknowledgements are pipelined, and one after another within an
//! aggregate, so a failure can never let a later message overtake it.

use std::future::Future;

use crate::message::OutboxMessage;

/// The broker's acknowledgement of one message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PublishAck {
    /// Where the broker stored it (the JetStream stream sequence), if known.
    pub stream_sequence: Option<u64>,
    /// The broker had stored this message id already (a re-publish absorbed
    /// by deduplication). Counts as success.
    pub duplicate: bool,
}

impl PublishAck {
    /// An ack at `stream_sequence` (if known); `duplicate` when the broker
    /// had the message id already.
    pub fn new(stream_sequence: Option<u64>, duplicate: bool) -> Self {
        Self {
            stream_sequence,
            duplicate,
        }
    }
}

/// Why a publish failed, which decides what the processor does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PublishErrorKind {
    /// The broker is unreachable, slow or not ready (disconnected, timed
    /// out, no responders while reconnecting). Nothing is wrong with the
    /// message: it goes back to pending **without** spending an attempt, and
    /// the processor backs off globally until the broker answers again.
    Unavailable,
    /// The broker refused this message (over the maximum payload, no stream
    /// for its subject, rejected by the stream). It spends an attempt, is
    /// retried with exponential backoff, and goes `dead` with this reason
    /// once its attempts run out.
    Rejected,
    /// The message can never be published (e.g. an invalid subject): it
    /// goes `dead` at once with the reason.
    Permanent,
}

/// A failed publish: its kind and a reason kept as the row's last error.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct PublishError {
    kind: PublishErrorKind,
    reason: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl PublishError {
    /// An error of `kind` with a human-readable `reason`.
    pub fn new(kind: PublishErrorKind, reason: impl Into<String>) -> Self {
        Self {
            kind,
            reason: reason.into(),
            source: None,
        }
    }

    /// The broker is unavailable (see [`PublishErrorKind::Unavailable`]).
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Self::new(PublishErrorKind::Unavailable, reason)
    }

    /// The broker rejected the message (see [`PublishErrorKind::Rejected`]).
    pub fn rejected(reason: impl Into<String>) -> Self {
        Self::new(PublishErrorKind::Rejected, reason)
    }

    /// The message can never be published (see [`PublishErrorKind::Permanent`]).
    pub fn permanent(reason: impl Into<String>) -> Self {
        Self::new(PublishErrorKind::Permanent, reason)
    }

    /// Attaches the underlying error.
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        self.source = Some(source.into());
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> PublishErrorKind {
        self.kind
    }

    /// The reason, as recorded on the outbox row.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Sends outbox messages to a broker.
///
/// `publish` must resolve only once the broker has durably accepted the
/// message as far as it promises to (for JetStream: the stream's ack), and
/// must be safe to call concurrently: the processor keeps many publishes in
/// flight. It must use [`OutboxMessage::id`] as the broker's deduplication
/// id, so a message published twice (a crash between the ack and marking
/// the row published) is stored once.
pub trait Publisher: Send + Sync + 'static {
    /// Publishes `message` and waits for the broker's acknowledgement.
    fn publish(
        &self,
        message: &OutboxMessage,
    ) -> impl Future<Output = Result<PublishAck, PublishError>> + Send;

    /// Publishes a run of one aggregate's consecutive messages, in order:
    /// message `k + 1` must never be stored before message `k`, whatever
    /// fails. Returns one result per message of a prefix of `run` (at least
    /// its first message): every result but the last is `Ok`; when the last
    /// is `Ok` too, the caller goes on with the rest of the run.
    ///
    /// The default publishes one message at a time, each after the previous
    /// one's ack, and stops at the first failure. A publisher whose broker
    /// can refuse a message unless its predecessor was the last one stored
    /// (JetStream's `Nats-Expected-Last-Msg-Id`) may keep several in flight.
    fn publish_run(
        &self,
        run: &[&OutboxMessage],
    ) -> impl Future<Output = Vec<Result<PublishAck, PublishError>>> + Send {
        async move {
            let mut results = Vec::with_capacity(run.len());
            for message in run {
                let result = self.publish(message).await;
                let failed = result.is_err();
                results.push(result);
                if failed {
                    break;
                }
            }
            results
        }
    }

    /// Checks, before the processor runs, that the broker stores what is
    /// published under `subjects` (a subject or a wildcard such as
    /// `shop.>`): [`Rejected`](PublishErrorKind::Rejected) with a reason
    /// naming what to create when nothing would, so a service fails at
    /// its start instead of sending its first messages to the dead. Any
    /// other failure is [`Unavailable`](PublishErrorKind::Unavailable) (the
    /// check could not be made). The default checks nothing.
    fn check_destination(
        &self,
        subjects: &str,
    ) -> impl Future<Output = Result<(), PublishError>> + Send {
        let _ = subjects;
        std::future::ready(Ok(()))
    }

    /// Whether the broker connection is up right now. While it is not, the
    /// processor claims nothing and publishes nothing; when it comes back,
    /// the processor catches up at once. The default says always.
    fn is_available(&self) -> bool {
        true
    }

    /// The longest a publish waits for the broker's acknowledgement before
    /// it fails as [`Unavailable`](PublishErrorKind::Unavailable), when the
    /// publisher bounds it (the default: unknown). The processor starts a
    /// publish only while a fifth of its lease is left, so it refuses a
    /// lease shorter than five times this: every ack (or its timeout) then
    /// comes back before the lease can end and another processor take the
    /// message over.
    fn ack_timeout(&self) -> Option<std::time::Duration> {
        None
    }
}
