//! Reading and replaying a consumer's dead letters (the copies the
//! [`DeadLetterPolicy`](crate::subscriber::DeadLetterPolicy) published): for operators,
//! through the `outbox dlq` command.
//!
//! A replay publishes the original message back to its subject (the
//! [`super::policy::SUBJECT`] header) once its cause is fixed:
//! the original body and headers, the `Outbox-Dead-*` headers removed, with
//! a **new message id** (`ce-id` and `Nats-Msg-Id`, so neither the stream's
//! duplicate window nor a consumer's inbox takes it for the original) and a
//! causation link: [`REPLAY_OF`] = the original message id,
//! [`REPLAYED_FROM`] = `<dead-letter stream>:<sequence>`.
//!
//! ```no_run
//! # async fn run(jetstream: txoutbox_nats::async_nats::jetstream::Context) -> Result<(), Box<dyn std::error::Error>> {
//! use txoutbox_nats::subscriber::dead_letter_replay::DeadLetters;
//! let dead = DeadLetters::of_consumer(&jetstream, "billing").await?;
//! for letter in dead.list(50).await? {
//!     println!("{} {:?}: {:?}", letter.sequence, letter.event_name, letter.reason);
//! }
//! let replayed = dead.replay(7).await?; // after fixing the cause
//! println!("replayed as {} at {}:{}", replayed.message_id, replayed.stream, replayed.stream_sequence);
//! # Ok(()) }
//! ```

use async_nats::HeaderMap;
use async_nats::jetstream::context::GetStreamByNameErrorKind;
use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::{self, stream::LastRawMessageErrorKind};
use chrono::{DateTime, Utc};
use txoutbox_core::{MessageId, wire};

use super::policy::{CONSUMER, DELIVERIES, KIND, REASON, STREAM, STREAM_SEQUENCE, SUBJECT};
use crate::stream_read::{self, ReadError, chrono_time};

/// Header of a replayed message: the id of the message it replays.
pub const REPLAY_OF: &str = "Outbox-Replay-Of";
/// Header of a replayed message: the dead letter it came from,
/// `<stream>:<sequence>`.
pub const REPLAYED_FROM: &str = "Outbox-Replayed-From";

/// The prefix every dead-letter header has.
const DEAD_PREFIX: &str = "Outbox-Dead-";

/// One dead letter.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DeadLetter {
    /// Its sequence in the dead-letter stream.
    pub sequence: u64,
    /// When it was dead-lettered.
    pub time: DateTime<Utc>,
    /// The subject it was published on (the original subject).
    pub original_subject: Option<String>,
    /// The original message id (`ce-id`).
    pub message_id: Option<String>,
    /// The event name (`ce-type`).
    pub event_name: Option<String>,
    /// Why ([`DeadLetterKind`](crate::subscriber::DeadLetterKind)).
    pub kind: Option<String>,
    /// Why, in words.
    pub reason: Option<String>,
    /// The consumer that gave up on it.
    pub consumer: Option<String>,
    /// Where the original is: its stream ...
    pub original_stream: Option<String>,
    /// ... and its sequence there.
    pub original_sequence: Option<u64>,
    /// How many times it was delivered.
    pub deliveries: Option<u64>,
    /// Every header, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub payload: Vec<u8>,
}

/// What a replay published.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Replayed {
    /// The dead letter's sequence.
    pub dead_letter: u64,
    /// The subject it was published to.
    pub subject: String,
    /// The new message id.
    pub message_id: MessageId,
    /// The id of the message it replays.
    pub replay_of: Option<String>,
    /// The stream that stored it ...
    pub stream: String,
    /// ... at this sequence.
    pub stream_sequence: u64,
}

/// Reading or replaying dead letters failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeadLetterError {
    /// No stream captures the consumer's dead-letter subject.
    #[error("no stream captures the dead-letter subject `{subject}`")]
    NoStream {
        /// The subject.
        subject: String,
    },
    /// The message at this sequence is not one of this subject's dead
    /// letters.
    #[error(
        "message {sequence} of stream `{stream}` is on `{actual}`, not a dead letter on `{subject}`"
    )]
    NotADeadLetter {
        /// The stream.
        stream: String,
        /// The sequence.
        sequence: u64,
        /// The dead-letter subject.
        subject: String,
        /// The message's subject.
        actual: String,
    },
    /// The dead letter does not say where it came from (no
    /// `Outbox-Dead-Subject`), so it cannot be replayed.
    #[error("dead letter {sequence} names no original subject (`{header}`)")]
    NoOriginalSubject {
        /// The sequence.
        sequence: u64,
        /// The header it lacks.
        header: &'static str,
    },
    /// Reading the stream failed (or no message at that sequence).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The replay's publish failed.
    #[error("replaying dead letter {sequence} to `{subject}`")]
    Publish {
        /// The dead letter.
        sequence: u64,
        /// The subject.
        subject: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The dead letters on one subject.
#[derive(Debug, Clone)]
pub struct DeadLetters {
    jetstream: jetstream::Context,
    stream: String,
    subject: String,
}

impl DeadLetters {
    /// The dead letters of consumer `durable` with the default policy
    /// (`dlq.<durable>`), in whichever stream captures them.
    pub async fn of_consumer(
        jetstream: &jetstream::Context,
        durable: &str,
    ) -> Result<Self, DeadLetterError> {
        Self::on_subject(jetstream, format!("dlq.{durable}")).await
    }

    /// The dead letters published to `subject` (a
    /// [`DeadLetterPolicy::publish_to`](crate::subscriber::DeadLetterPolicy::publish_to)
    /// subject), in whichever stream captures them.
    pub async fn on_subject(
        jetstream: &jetstream::Context,
        subject: impl Into<String>,
    ) -> Result<Self, DeadLetterError> {
        let subject = subject.into();
        let stream = match jetstream.stream_by_subject(&subject).await {
            Ok(stream) => stream,
            Err(err) if err.kind() == GetStreamByNameErrorKind::NotFound => {
                return Err(DeadLetterError::NoStream { subject });
            }
            Err(err) => {
                return Err(ReadError::Request {
                    stream: format!("(capturing `{subject}`)"),
                    source: Box::new(err),
                }
                .into());
            }
        };
        Ok(Self {
            jetstream: jetstream.clone(),
            stream,
            subject,
        })
    }

    /// The stream holding them.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// Their subject.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The oldest `limit` dead letters, oldest first.
    pub async fn list(&self, limit: usize) -> Result<Vec<DeadLetter>, DeadLetterError> {
        let stream = stream_read::open_stream(&self.jetstream, &self.stream).await?;
        let mut out = Vec::new();
        let mut from = 1;
        while out.len() < limit {
            match stream
                .get_first_raw_message_by_subject(&self.subject, from)
                .await
            {
                Ok(message) => {
                    from = message.sequence + 1;
                    out.push(dead_letter(message));
                }
                Err(err) if matches!(err.kind(), LastRawMessageErrorKind::NoMessageFound) => break,
                Err(err) => match stream_read::no_message(&self.stream, from, err) {
                    ReadError::NoMessage { .. } => break,
                    other => return Err(other.into()),
                },
            }
        }
        Ok(out)
    }

    /// The dead letter at `sequence`.
    pub async fn get(&self, sequence: u64) -> Result<DeadLetter, DeadLetterError> {
        let message = stream_read::message_at(&self.jetstream, &self.stream, sequence).await?;
        if message.subject.as_str() != self.subject {
            return Err(DeadLetterError::NotADeadLetter {
                stream: self.stream.clone(),
                sequence,
                subject: self.subject.clone(),
                actual: message.subject.to_string(),
            });
        }
        Ok(dead_letter(message))
    }

    /// Publishes the dead letter at `sequence` back to its original subject
    /// with a new message id and a causation link (see the module docs),
    /// and waits for JetStream's ack. The dead letter stays where it is.
    pub async fn replay(&self, sequence: u64) -> Result<Replayed, DeadLetterError> {
        let letter = self.get(sequence).await?;
        let subject =
            letter
                .original_subject
                .clone()
                .ok_or(DeadLetterError::NoOriginalSubject {
                    sequence,
                    header: SUBJECT,
                })?;
        let message_id = MessageId::new();
        let id_text = message_id.to_string();
        let mut headers = HeaderMap::new();
        for (name, value) in &letter.headers {
            let dropped = starts_with(name, DEAD_PREFIX)
                || name.eq_ignore_ascii_case(wire::NATS_MSG_ID)
                || name.eq_ignore_ascii_case(wire::ID)
                || name.eq_ignore_ascii_case(REPLAY_OF)
                || name.eq_ignore_ascii_case(REPLAYED_FROM);
            if !dropped {
                headers.append(name.as_str(), value.as_str());
            }
        }
        headers.insert(wire::NATS_MSG_ID, id_text.as_str());
        headers.insert(wire::ID, id_text.as_str());
        if let Some(original) = &letter.message_id {
            headers.insert(REPLAY_OF, original.as_str());
        }
        headers.insert(
            REPLAYED_FROM,
            format!("{}:{sequence}", self.stream).as_str(),
        );
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| DeadLetterError::Publish {
            sequence,
            subject: subject.clone(),
            source,
        };
        let ack = self
            .jetstream
            .publish_with_headers(subject.clone(), headers, letter.payload.clone().into())
            .await
            .map_err(|e| failed(Box::new(e)))?
            .await
            .map_err(|e| failed(Box::new(e)))?;
        tracing::info!(dead_letter = sequence, %subject, id = %message_id, stream = %ack.stream, stream_sequence = ack.sequence, "dead letter replayed");
        Ok(Replayed {
            dead_letter: sequence,
            subject,
            message_id,
            replay_of: letter.message_id,
            stream: ack.stream,
            stream_sequence: ack.sequence,
        })
    }
}

fn starts_with(name: &str, prefix: &str) -> bool {
    name.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

fn dead_letter(message: StreamMessage) -> DeadLetter {
    let headers: Vec<(String, String)> = message
        .headers
        .iter()
        .flat_map(|(name, values)| {
            values
                .iter()
                .map(move |value| (name.to_string(), value.to_string()))
        })
        .collect();
    let find = |wanted: &str| {
        headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(wanted))
            .map(|(_, value)| value.clone())
    };
    DeadLetter {
        sequence: message.sequence,
        time: chrono_time(message.time),
        original_subject: find(SUBJECT),
        message_id: find(wire::ID),
        event_name: find(wire::TYPE),
        kind: find(KIND),
        reason: find(REASON),
        consumer: find(CONSUMER),
        original_stream: find(STREAM),
        original_sequence: find(STREAM_SEQUENCE).and_then(|s| s.parse().ok()),
        deliveries: find(DELIVERIES).and_then(|s| s.parse().ok()),
        payload: message.payload.to_vec(),
        headers,
    }
}
