//! [`Discrepancy`]: one way the table and the stream disagree.

use std::fmt;

use super::records::StalePending;
use crate::id::MessageId;

/// One way the table and the stream disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Discrepancy {
    /// A row is marked published but its message is not in the stream
    /// (deleted, purged by the stream's limits, or lost by the server).
    Missing {
        /// The message id.
        id: MessageId,
        /// Its aggregate's type.
        aggregate_type: String,
        /// Its aggregate's id.
        aggregate_id: String,
        /// Its sequence in the aggregate.
        sequence: u64,
        /// The stream sequence the row recorded.
        recorded_stream_sequence: Option<u64>,
    },
    /// One message id is stored more than once.
    Duplicate {
        /// The `Nats-Msg-Id`.
        message_id: String,
        /// Where each copy is, in stream order.
        stream_sequences: Vec<u64>,
    },
    /// An aggregate's later message is stored before an earlier one.
    OutOfOrder {
        /// The aggregate's type.
        aggregate_type: String,
        /// The aggregate's id.
        aggregate_id: String,
        /// The aggregate sequence stored first.
        first_sequence: u64,
        /// Its stream sequence.
        first_stream_sequence: u64,
        /// The lower aggregate sequence stored after it.
        then_sequence: u64,
        /// Its stream sequence.
        then_stream_sequence: u64,
    },
    /// A row is still pending after the threshold.
    StalePending(StalePending),
}

impl Discrepancy {
    /// A short name of the kind: `missing`, `duplicate`, `out-of-order`,
    /// `stale-pending`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Missing { .. } => "missing",
            Self::Duplicate { .. } => "duplicate",
            Self::OutOfOrder { .. } => "out-of-order",
            Self::StalePending(_) => "stale-pending",
        }
    }
}

impl fmt::Display for Discrepancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing {
                id,
                aggregate_type,
                aggregate_id,
                sequence,
                recorded_stream_sequence,
            } => {
                write!(
                    f,
                    "missing: message {id} ({aggregate_type}/{aggregate_id} #{sequence}) is marked \
                     published but is not in the stream"
                )?;
                match recorded_stream_sequence {
                    Some(seq) => write!(f, " (recorded at stream sequence {seq})"),
                    None => Ok(()),
                }
            }
            Self::Duplicate {
                message_id,
                stream_sequences,
            } => write!(
                f,
                "duplicate: message {message_id} is stored {} times, at stream sequences {}",
                stream_sequences.len(),
                join(stream_sequences)
            ),
            Self::OutOfOrder {
                aggregate_type,
                aggregate_id,
                first_sequence,
                first_stream_sequence,
                then_sequence,
                then_stream_sequence,
            } => write!(
                f,
                "out-of-order: {aggregate_type}/{aggregate_id} #{first_sequence} is at stream \
                 sequence {first_stream_sequence}, before #{then_sequence} at stream sequence \
                 {then_stream_sequence}"
            ),
            Self::StalePending(row) => write!(
                f,
                "stale-pending: message {} ({} {}/{} #{}) is still pending after {:.0} s \
                 ({} attempts)",
                row.id,
                row.event_name,
                row.aggregate_type,
                row.aggregate_id,
                row.sequence,
                row.age.as_secs_f64(),
                row.attempts
            ),
        }
    }
}

fn join(values: &[u64]) -> String {
    values
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
