//! Reading back what a stream stored, for reconciliation with the outbox
//! table (`outbox verify`): headers only, through an ordered consumer that
//! starts at a time, and single messages by sequence. Nothing here touches
//! the publisher.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::consumer::{DeliverPolicy, pull::OrderedConfig};
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::stream::{LastRawMessageErrorKind, Stream};
use async_nats::jetstream::{self, ErrorCode};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use txoutbox_core::verify::{AggregatePosition, StreamedMessage};
use txoutbox_core::wire;

/// How long reading waits for the next message before giving up.
const NEXT_MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Reading a stream failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// No stream of that name.
    #[error("stream `{stream}` does not exist")]
    StreamNotFound {
        /// The stream.
        stream: String,
    },
    /// No message at that sequence (never stored, deleted, or expired).
    #[error("stream `{stream}` has no message at sequence {sequence}")]
    NoMessage {
        /// The stream.
        stream: String,
        /// The sequence.
        sequence: u64,
    },
    /// A JetStream request failed.
    #[error("reading stream `{stream}`")]
    Request {
        /// The stream.
        stream: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl ReadError {
    fn request(stream: &str, err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Request {
            stream: stream.to_owned(),
            source: Box::new(err),
        }
    }
}

/// The stream `name`, or [`ReadError::StreamNotFound`].
pub async fn open_stream(jetstream: &jetstream::Context, name: &str) -> Result<Stream, ReadError> {
    jetstream
        .get_stream(name)
        .await
        .map_err(|err| match err.kind() {
            GetStreamErrorKind::JetStream(js) if js.error_code() == ErrorCode::STREAM_NOT_FOUND => {
                ReadError::StreamNotFound {
                    stream: name.to_owned(),
                }
            }
            _ => ReadError::request(name, err),
        })
}

/// Every message of `stream` stored at or after `since` (all of them
/// without), headers only, in stream order: read with an ordered consumer
/// (ephemeral, no acks, payloads left on the server) up to the last message
/// stored when it was created.
pub async fn stored_messages(
    jetstream: &jetstream::Context,
    stream: &str,
    since: Option<DateTime<Utc>>,
) -> Result<Vec<StreamedMessage>, ReadError> {
    let handle = open_stream(jetstream, stream).await?;
    let deliver_policy = match since {
        None => DeliverPolicy::All,
        Some(since) => DeliverPolicy::ByStartTime {
            start_time: offset_time(since),
        },
    };
    let consumer = handle
        .create_consumer(OrderedConfig {
            headers_only: true,
            deliver_policy,
            ..OrderedConfig::default()
        })
        .await
        .map_err(|e| ReadError::request(stream, e))?;
    let mut remaining = consumer.cached_info().num_pending;
    let mut out = Vec::with_capacity(usize::try_from(remaining).unwrap_or(0));
    if remaining == 0 {
        return Ok(out);
    }
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| ReadError::request(stream, e))?;
    while remaining > 0 {
        let next = tokio::time::timeout(NEXT_MESSAGE_TIMEOUT, messages.next())
            .await
            .map_err(|e| ReadError::request(stream, e))?;
        let message = match next {
            Some(Ok(message)) => message,
            Some(Err(err)) => return Err(ReadError::request(stream, err)),
            None => break,
        };
        let info = message.info().map_err(|e| ReadError::Request {
            stream: stream.to_owned(),
            source: e,
        })?;
        let sequence = info.stream_sequence;
        remaining = info.pending.min(remaining.saturating_sub(1));
        out.push(stored(sequence, message.headers.as_ref()));
    }
    Ok(out)
}

/// The message at `sequence` of `stream`, with its payload.
pub async fn message_at(
    jetstream: &jetstream::Context,
    stream: &str,
    sequence: u64,
) -> Result<StreamMessage, ReadError> {
    let handle = open_stream(jetstream, stream).await?;
    handle
        .get_raw_message(sequence)
        .await
        .map_err(|err| no_message(stream, sequence, err))
}

/// `err` of a raw get as [`ReadError::NoMessage`] when it says so.
pub(crate) fn no_message(
    stream: &str,
    sequence: u64,
    err: async_nats::jetstream::stream::RawMessageError,
) -> ReadError {
    let missing = match err.kind() {
        LastRawMessageErrorKind::NoMessageFound => true,
        LastRawMessageErrorKind::JetStream(js) => {
            js.error_code() == ErrorCode::NO_MESSAGE_FOUND
                || js.error_code() == ErrorCode::SEQUENCE_NOT_FOUND
        }
        _ => false,
    };
    if missing {
        ReadError::NoMessage {
            stream: stream.to_owned(),
            sequence,
        }
    } else {
        ReadError::request(stream, err)
    }
}

/// A stored message as the reconciliation sees it.
pub fn stored(sequence: u64, headers: Option<&HeaderMap>) -> StreamedMessage {
    let find = |name: &str| {
        headers
            .and_then(|h| h.get(name))
            .map(|v| v.as_str().to_owned())
    };
    let position = match (
        find(wire::AGGREGATE_TYPE),
        find(wire::SUBJECT),
        find(wire::SEQUENCE).and_then(|s| s.parse().ok()),
    ) {
        (Some(aggregate_type), Some(aggregate_id), Some(sequence)) => Some(AggregatePosition {
            aggregate_type,
            aggregate_id,
            sequence,
        }),
        _ => None,
    };
    StreamedMessage {
        stream_sequence: sequence,
        message_id: find(wire::NATS_MSG_ID),
        position,
    }
}

/// A JetStream time as a chrono time.
pub(crate) fn chrono_time(time: time::OffsetDateTime) -> DateTime<Utc> {
    let nanos = i64::try_from(time.unix_timestamp_nanos()).unwrap_or(i64::MAX);
    DateTime::from_timestamp_nanos(nanos)
}

fn offset_time(time: DateTime<Utc>) -> time::OffsetDateTime {
    let nanos = time.timestamp_nanos_opt().unwrap_or(0);
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(nanos))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}
