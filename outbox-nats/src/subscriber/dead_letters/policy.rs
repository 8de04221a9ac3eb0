//! Messages the subscriber cannot handle: the policy, the reasons, and the
//! copy published to the dead-letter subject.
//!
//! A message is *dead* when it can never be handled here: its envelope is
//! invalid (headers missing, body not JSON), its event is unknown or no
//! handler takes it, its payload does not fit the handler's type, a handler
//! rejected it as [permanent](txoutbox_core::HandlerError::permanent), or its
//! handler still failed on the last delivery JetStream allows
//! (`max_deliver`). None of these crash the subscriber, and none is dropped
//! silently: the [`DeadLetterPolicy`] decides.
//!
//! With the default policy the copy is published, through JetStream (so
//! a stream must capture the dead-letter subject, e.g. `dlq.>`, and it must
//! not be a subject the consumer itself reads), with the original body, the
//! original headers (except `Nats-Expected-*`, and the `Nats-Pin-Id` the
//! server stamps on deliveries with failover), and:
//!
//! | header | value |
//! |---|---|
//! | [`REASON`] `Outbox-Dead-Reason` | why, in words (the decode error, the handler's last error) |
//! | [`KIND`] `Outbox-Dead-Kind` | a [`DeadLetterKind`], e.g. `invalid-envelope` |
//! | [`CONSUMER`] `Outbox-Dead-Consumer` | the durable consumer |
//! | [`STREAM`] `Outbox-Dead-Stream` | the stream it was read from |
//! | [`STREAM_SEQUENCE`] `Outbox-Dead-Stream-Sequence` | its sequence there |
//! | [`SUBJECT`] `Outbox-Dead-Subject` | the subject it was published on |
//! | [`DELIVERIES`] `Outbox-Dead-Deliveries` | how many times it was delivered |
//! | `Nats-Msg-Id` | `<consumer>:<message id>` (or `<consumer>:<stream>:<sequence>`), so dead-lettering one message twice stores one copy |
//!
//! Only once the copy is acknowledged is the original terminated
//! (`AckKind::Term`); if the publish fails (three attempts) it is nakked and
//! tried again on its next delivery. On its last delivery there is no next
//! one: the message then stays in the stream, undelivered, and the failure
//! is logged at error level and counted (`outcome="dead_letter_failed"`).

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, Context};
use txoutbox_core::wire;

/// Header: why the message is dead.
pub const REASON: &str = "Outbox-Dead-Reason";
/// Header: the [`DeadLetterKind`].
pub const KIND: &str = "Outbox-Dead-Kind";
/// Header: the consumer that gave up on it.
pub const CONSUMER: &str = "Outbox-Dead-Consumer";
/// Header: the stream it was read from.
pub const STREAM: &str = "Outbox-Dead-Stream";
/// Header: its sequence in that stream.
pub const STREAM_SEQUENCE: &str = "Outbox-Dead-Stream-Sequence";
/// Header: the subject it was published on.
pub const SUBJECT: &str = "Outbox-Dead-Subject";
/// Header: how many times it was delivered.
pub const DELIVERIES: &str = "Outbox-Dead-Deliveries";

/// The longest reason carried in a header, in bytes.
const MAX_REASON: usize = 2048;

/// Publish attempts before giving up on the dead-letter copy for this delivery.
const PUBLISH_ATTEMPTS: u32 = 3;

/// What the subscriber does with a message it cannot handle.
///
/// ```
/// use txoutbox_nats::subscriber::DeadLetterPolicy;
/// let default = DeadLetterPolicy::default();          // publish to `dlq.<durable>`
/// let custom = DeadLetterPolicy::publish_to("dead.orders-projection");
/// let drop_it = DeadLetterPolicy::terminate();          // logged and counted, no copy
/// let keep_it = DeadLetterPolicy::redeliver();          // nak; try again later
/// # let _ = (default, custom, drop_it, keep_it);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeadLetterPolicy(Policy);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Policy {
    #[default]
    PublishDefault,
    PublishTo(String),
    Terminate,
    Redeliver,
}

impl DeadLetterPolicy {
    /// Publish a copy to `dlq.<durable>`, then terminate (the default).
    pub fn publish() -> Self {
        Self(Policy::PublishDefault)
    }

    /// Publish a copy to `subject`, then terminate.
    pub fn publish_to(subject: impl Into<String>) -> Self {
        Self(Policy::PublishTo(subject.into()))
    }

    /// Terminate it (`AckKind::Term`) without a copy; it is logged at error
    /// level and counted (`outcome="terminated"`), and stays in the stream
    /// until the stream's retention removes it.
    pub fn terminate() -> Self {
        Self(Policy::Terminate)
    }

    /// Nak it with the backoff delay so it is delivered again: for a
    /// consumer that expects to learn the event soon (a deployment in
    /// progress). After `max_deliver` deliveries JetStream stops delivering
    /// it (it stays in the stream, and JetStream publishes a
    /// `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES` advisory).
    pub fn redeliver() -> Self {
        Self(Policy::Redeliver)
    }

    /// The dead-letter subject for `durable`, if this policy publishes.
    pub(crate) fn subject(&self, durable: &str) -> Option<String> {
        match &self.0 {
            Policy::PublishDefault => Some(format!("dlq.{durable}")),
            Policy::PublishTo(subject) => Some(subject.clone()),
            Policy::Terminate | Policy::Redeliver => None,
        }
    }

    pub(crate) fn redelivers(&self) -> bool {
        self.0 == Policy::Redeliver
    }

    /// Whether the dead letters of `durable` stay apart from what it reads
    /// (its consumers' `filters`): the reason, when a filter would bring
    /// them back to it.
    pub(crate) fn check_apart_from(&self, durable: &str, filters: &[String]) -> Result<(), String> {
        let Some(subject) = self.subject(durable) else {
            return Ok(());
        };
        match filters
            .iter()
            .find(|filter| crate::subject::covers(filter, &subject))
        {
            Some(filter) => Err(format!(
                "the dead-letter subject `{subject}` matches the consumer's filter `{filter}`: \
                 dead letters would come back to it"
            )),
            None => Ok(()),
        }
    }
}

/// Why a message is dead: the value of the [`KIND`] header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeadLetterKind {
    /// `invalid-envelope`: required headers are missing or invalid, or the
    /// body is not JSON (see [`txoutbox_core::wire`]).
    InvalidEnvelope,
    /// `unknown-event`: no type is registered under the event name.
    UnknownEvent,
    /// `unknown-version`: the name is known, the version is not.
    UnknownVersion,
    /// `no-handler`: the event is known but no handler of this subscriber
    /// takes it.
    NoHandler,
    /// `malformed`: the payload does not deserialize into the type.
    Malformed,
    /// `not-convertible`: no upcast leads from the message's version to the
    /// handler's type (e.g. a newer version than the handler knows).
    NotConvertible,
    /// `rejected`: the handler returned a permanent error.
    Rejected,
    /// `exhausted`: the handler failed on the last allowed delivery.
    Exhausted,
}

impl DeadLetterKind {
    /// Whether a message dead for this reason holds its aggregate (with
    /// [`keep_order`](crate::subscriber::SubscriberBuilder::keep_order)): it was meant
    /// for a handler of this consumer and could not be applied, so its
    /// aggregate's later messages must not be applied past it. Messages no
    /// handler here takes, or whose envelope names no aggregate, hold
    /// nothing.
    pub fn holds_aggregate(self) -> bool {
        matches!(
            self,
            Self::UnknownVersion
                | Self::Malformed
                | Self::NotConvertible
                | Self::Rejected
                | Self::Exhausted
        )
    }

    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidEnvelope => "invalid-envelope",
            Self::UnknownEvent => "unknown-event",
            Self::UnknownVersion => "unknown-version",
            Self::NoHandler => "no-handler",
            Self::Malformed => "malformed",
            Self::NotConvertible => "not-convertible",
            Self::Rejected => "rejected",
            Self::Exhausted => "exhausted",
        }
    }
}

impl std::fmt::Display for DeadLetterKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a dead message came from, for its headers.
pub(crate) struct Origin<'a> {
    pub(crate) consumer: &'a str,
    pub(crate) stream: &'a str,
    pub(crate) stream_sequence: u64,
    pub(crate) deliveries: u64,
}

/// Publishes the dead-letter copy of `message` to `subject` and waits for
/// JetStream's acknowledgement, trying a few times.
pub(crate) async fn publish(
    context: &Context,
    subject: &str,
    message: &jetstream::Message,
    kind: DeadLetterKind,
    reason: &str,
    origin: &Origin<'_>,
) -> Result<(), String> {
    let headers = headers(message, kind, reason, origin);
    let mut last_error = String::new();
    for attempt in 0..PUBLISH_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(100 * 3u64.pow(attempt))).await;
        }
        let sent = context
            .publish_with_headers(subject.to_owned(), headers.clone(), message.payload.clone())
            .await;
        match sent {
            Ok(ack) => match ack.await {
                Ok(_) => return Ok(()),
                Err(err) => last_error = err.to_string(),
            },
            Err(err) => last_error = err.to_string(),
        }
    }
    Err(last_error)
}

fn headers(
    message: &jetstream::Message,
    kind: DeadLetterKind,
    reason: &str,
    origin: &Origin<'_>,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let mut original_id = None;
    if let Some(original) = &message.headers {
        for (name, values) in original.iter() {
            let name: &str = name.as_ref();
            if name.eq_ignore_ascii_case(wire::ID) {
                original_id = values.first().map(|v| v.as_str().to_owned());
            }
            // The pin id is the server's stamp on this delivery (failover).
            let skip = name.eq_ignore_ascii_case(wire::NATS_MSG_ID)
                || name.eq_ignore_ascii_case(async_nats::header::NATS_PIN_ID.as_ref())
                || name
                    .get(..13)
                    .is_some_and(|head| head.eq_ignore_ascii_case("Nats-Expected"));
            if !skip {
                for value in values {
                    headers.append(name, value.as_str());
                }
            }
        }
    }
    let dedup_id = match original_id {
        Some(id) => format!("{}:{id}", origin.consumer),
        None => format!(
            "{}:{}:{}",
            origin.consumer, origin.stream, origin.stream_sequence
        ),
    };
    headers.insert(wire::NATS_MSG_ID, dedup_id.as_str());
    headers.insert(REASON, one_line(reason).as_str());
    headers.insert(KIND, kind.as_str());
    headers.insert(CONSUMER, origin.consumer);
    headers.insert(STREAM, origin.stream);
    headers.insert(STREAM_SEQUENCE, origin.stream_sequence.to_string().as_str());
    headers.insert(SUBJECT, message.subject.as_str());
    headers.insert(DELIVERIES, origin.deliveries.to_string().as_str());
    headers
}

/// `reason` as one header-safe line of at most [`MAX_REASON`] bytes.
fn one_line(reason: &str) -> String {
    let mut line: String = reason
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.len() > MAX_REASON {
        let mut end = MAX_REASON;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_become_one_bounded_line() {
        assert_eq!(one_line("a\r\nb\tc"), "a  b c");
        let long = "é".repeat(MAX_REASON);
        let line = one_line(&long);
        assert!(line.len() <= MAX_REASON && line.chars().all(|c| c == 'é'));
    }

    #[test]
    fn default_subject_is_per_durable() {
        assert_eq!(
            DeadLetterPolicy::default().subject("billing").as_deref(),
            Some("dlq.billing")
        );
        assert_eq!(DeadLetterPolicy::terminate().subject("billing"), None);
    }
}
