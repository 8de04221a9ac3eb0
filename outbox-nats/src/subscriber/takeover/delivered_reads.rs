//! Reading what a consumer delivered past its ack floor, for the restart
//! guard (see `restart`): the stream's messages of the consumer's subjects
//! in a range of stream sequences, in stream order.
//!
//! The range is read in spans of [`SPAN`] stream sequences, many spans at
//! once; each span by asking the stream for the first message of the
//! consumer's subjects at or after a sequence, again past each one found.
//! A span costs one request per message of the consumer's in it, plus one:
//! the messages of other subjects between them (a stream shared with other
//! consumers), or sequences deleted, cost nothing.

use std::ops::RangeInclusive;

use async_nats::jetstream::consumer;
use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::stream::{LastRawMessageError, LastRawMessageErrorKind, Stream};
use futures::StreamExt;

use crate::subject::covers;

/// Stream sequences per span.
const SPAN: u64 = 1_000;

/// Spans read at once.
const SPANS_IN_FLIGHT: usize = 32;

/// The subjects a consumer receives, as its configuration names them.
#[derive(Debug, Clone)]
pub(crate) struct Subjects {
    /// What each span asks for: the consumer's filter, or every subject
    /// (`>`) when it has none.
    asked: String,
    /// The consumer's filter; empty: none.
    filter: String,
}

impl Subjects {
    /// The subjects of the consumer `config` describes.
    pub(crate) fn of(config: &consumer::Config) -> Self {
        let filter = config.filter_subject.clone();
        let asked = if filter.is_empty() {
            ">".to_owned()
        } else {
            filter.clone()
        };
        Self { asked, filter }
    }

    /// Whether the consumer receives messages of `subject`.
    fn receives(&self, subject: &str) -> bool {
        self.filter.is_empty() || covers(&self.filter, subject)
    }
}

/// The messages of `subjects` in `range` (stream sequences), in stream
/// order.
pub(crate) async fn read(
    stream: &Stream,
    subjects: &Subjects,
    range: RangeInclusive<u64>,
) -> Result<Vec<StreamMessage>, LastRawMessageError> {
    let (first, last) = (*range.start(), *range.end());
    let spans = (first..=last)
        .step_by(usize::try_from(SPAN).unwrap_or(usize::MAX))
        .map(|start| start..=last.min(start.saturating_add(SPAN - 1)));
    let mut reads = futures::stream::iter(spans)
        .map(|span| read_span(stream, subjects, span))
        .buffered(SPANS_IN_FLIGHT);
    let mut messages = Vec::new();
    while let Some(span) = reads.next().await {
        messages.extend(span?);
    }
    Ok(messages)
}

/// The messages of `subjects` in `span`, in stream order.
async fn read_span(
    stream: &Stream,
    subjects: &Subjects,
    span: RangeInclusive<u64>,
) -> Result<Vec<StreamMessage>, LastRawMessageError> {
    let (mut next, last) = (*span.start(), *span.end());
    let mut found = Vec::new();
    while next <= last {
        let message = match stream
            .get_first_raw_message_by_subject(&subjects.asked, next)
            .await
        {
            Ok(message) => message,
            // None at or after `next`: the stream ends before the span does.
            Err(err) if err.kind() == LastRawMessageErrorKind::NoMessageFound => break,
            Err(err) => return Err(err),
        };
        if message.sequence > last {
            break;
        }
        next = message.sequence + 1;
        if subjects.receives(&message.subject) {
            found.push(message);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(filter: &str) -> consumer::Config {
        consumer::Config {
            filter_subject: filter.to_owned(),
            ..Default::default()
        }
    }

    #[test]
    fn the_filter_is_asked_for_without_one_every_subject() {
        let one = Subjects::of(&config("events.order.>"));
        assert_eq!(one.asked, "events.order.>");
        assert!(one.receives("events.order.placed") && !one.receives("events.filler"));
        let none = Subjects::of(&config(""));
        assert_eq!(none.asked, ">");
        assert!(none.receives("anything.at.all"));
    }
}
