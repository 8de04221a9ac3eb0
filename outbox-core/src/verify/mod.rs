//! Reconciling the outbox table with the stream it publishes to: what the
//! table says was published against what the stream holds.
//!
//! The reads are the stores' and brokers' (`outbox-sea-orm` reads the
//! published rows, `outbox-nats` the stream); this module only compares,
//! so the rules are the same whatever reads them:
//!
//! | check | discrepancy |
//! |---|---|
//! | every row marked published has its message in the stream (matched by `Nats-Msg-Id` = message id) | [`Discrepancy::Missing`] |
//! | no message id is stored twice in the stream (a re-publish after the duplicate window) | [`Discrepancy::Duplicate`] |
//! | per aggregate, stream sequences increase with the aggregate sequence | [`Discrepancy::OutOfOrder`] |
//! | no row older than a threshold is still pending | [`Discrepancy::StalePending`] |
//!
//! ```
//! use txoutbox_core::MessageId;
//! use txoutbox_core::verify::{Discrepancy, PublishedRecord, StoredMessage, reconcile};
//!
//! let id = MessageId::new();
//! let row = PublishedRecord {
//!     id, aggregate_type: "order".into(), aggregate_id: "o-1".into(),
//!     sequence: 1, stream_sequence: Some(7),
//! };
//! // The stream lost it.
//! let report = reconcile(&[row], &[], Vec::new());
//! assert!(matches!(report.discrepancies[..], [Discrepancy::Missing { .. }]));
//! assert!(!report.is_clean());
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use crate::id::MessageId;

/// A row of the outbox table marked published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedRecord {
    /// The message id (its `Nats-Msg-Id`).
    pub id: MessageId,
    /// Its aggregate's type.
    pub aggregate_type: String,
    /// Its aggregate's id.
    pub aggregate_id: String,
    /// Its position in the aggregate's history.
    pub sequence: u64,
    /// The stream sequence the broker acknowledged, as recorded.
    pub stream_sequence: Option<u64>,
}

/// Where a stored message sits in its aggregate's history, from its
/// headers (`ce-aggregatetype`, `ce-subject`, `ce-sequence`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AggregatePosition {
    /// The aggregate's type.
    pub aggregate_type: String,
    /// The aggregate's id.
    pub aggregate_id: String,
    /// The message's sequence in it.
    pub sequence: u64,
}

/// A message stored in the stream, as far as the reconciliation needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Its stream sequence.
    pub stream_sequence: u64,
    /// Its `Nats-Msg-Id`, if it has one.
    pub message_id: Option<String>,
    /// Its aggregate position, if its headers name one.
    pub position: Option<AggregatePosition>,
}

/// A pending row older than the threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StalePending {
    /// The message id.
    pub id: MessageId,
    /// Its event name.
    pub event_name: String,
    /// Its aggregate's type.
    pub aggregate_type: String,
    /// Its aggregate's id.
    pub aggregate_id: String,
    /// Its sequence in the aggregate.
    pub sequence: u64,
    /// Publish attempts spent on it.
    pub attempts: u32,
    /// How long ago it was written, by the database clock.
    pub age: Duration,
}

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

/// What a reconciliation checked and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reconciliation {
    /// Published rows checked against the stream.
    pub rows_checked: u64,
    /// Stream messages read.
    pub messages_checked: u64,
    /// Aggregates whose order was checked in the stream.
    pub aggregates_checked: u64,
    /// Stream messages with no published row among those read (written by
    /// another producer, rows purged or not yet completed): not a
    /// discrepancy, counted for the record.
    pub messages_without_row: u64,
    /// Every disagreement, missing rows first, then duplicates, order, and
    /// stale pending rows.
    pub discrepancies: Vec<Discrepancy>,
}

impl Reconciliation {
    /// No discrepancy.
    pub fn is_clean(&self) -> bool {
        self.discrepancies.is_empty()
    }

    /// How many discrepancies of `kind` ([`Discrepancy::kind`]).
    pub fn count(&self, kind: &str) -> usize {
        self.discrepancies
            .iter()
            .filter(|d| d.kind() == kind)
            .count()
    }
}

/// Compares `rows` (published, per the table) with `messages` (read from
/// the stream, in any order) and appends `stale` pending rows.
///
/// A row is found when a message carries its id as `Nats-Msg-Id`. Order is
/// checked on the first copy of each message id, so a duplicate is reported
/// once, as a duplicate.
pub fn reconcile(
    rows: &[PublishedRecord],
    messages: &[StoredMessage],
    stale: Vec<StalePending>,
) -> Reconciliation {
    let mut sorted: Vec<&StoredMessage> = messages.iter().collect();
    sorted.sort_by_key(|m| m.stream_sequence);

    let mut copies: HashMap<&str, Vec<u64>> = HashMap::new();
    for message in &sorted {
        if let Some(id) = &message.message_id {
            copies
                .entry(id.as_str())
                .or_default()
                .push(message.stream_sequence);
        }
    }

    let mut discrepancies = Vec::new();
    let mut row_ids = std::collections::HashSet::with_capacity(rows.len());
    for row in rows {
        let id = row.id.to_string();
        if !copies.contains_key(id.as_str()) {
            discrepancies.push(Discrepancy::Missing {
                id: row.id,
                aggregate_type: row.aggregate_type.clone(),
                aggregate_id: row.aggregate_id.clone(),
                sequence: row.sequence,
                recorded_stream_sequence: row.stream_sequence,
            });
        }
        row_ids.insert(id);
    }

    let mut duplicates: Vec<Discrepancy> = copies
        .iter()
        .filter(|(_, seqs)| seqs.len() > 1)
        .map(|(id, seqs)| Discrepancy::Duplicate {
            message_id: (*id).to_owned(),
            stream_sequences: seqs.clone(),
        })
        .collect();
    duplicates.sort_by_key(|d| match d {
        Discrepancy::Duplicate {
            stream_sequences, ..
        } => stream_sequences.first().copied(),
        _ => None,
    });
    discrepancies.extend(duplicates);

    // Per aggregate, the highest sequence stored so far and where.
    let mut highest: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    let mut seen_ids = std::collections::HashSet::new();
    for message in &sorted {
        if let Some(id) = &message.message_id
            && !seen_ids.insert(id.as_str())
        {
            continue; // a later copy: reported as a duplicate
        }
        let Some(position) = &message.position else {
            continue;
        };
        let key = (
            position.aggregate_type.as_str(),
            position.aggregate_id.as_str(),
        );
        match highest.get(&key) {
            Some(&(sequence, stream_sequence)) if position.sequence < sequence => {
                discrepancies.push(Discrepancy::OutOfOrder {
                    aggregate_type: position.aggregate_type.clone(),
                    aggregate_id: position.aggregate_id.clone(),
                    first_sequence: sequence,
                    first_stream_sequence: stream_sequence,
                    then_sequence: position.sequence,
                    then_stream_sequence: message.stream_sequence,
                });
            }
            _ => {
                highest.insert(key, (position.sequence, message.stream_sequence));
            }
        }
    }

    let messages_without_row = copies.keys().filter(|id| !row_ids.contains(**id)).count() as u64
        + sorted.iter().filter(|m| m.message_id.is_none()).count() as u64;
    discrepancies.extend(stale.into_iter().map(Discrepancy::StalePending));
    Reconciliation {
        rows_checked: rows.len() as u64,
        messages_checked: messages.len() as u64,
        aggregates_checked: highest.len() as u64,
        messages_without_row,
        discrepancies,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: MessageId, aggregate: &str, sequence: u64) -> PublishedRecord {
        PublishedRecord {
            id,
            aggregate_type: "order".into(),
            aggregate_id: aggregate.into(),
            sequence,
            stream_sequence: None,
        }
    }

    fn stored(seq: u64, id: MessageId, aggregate: &str, sequence: u64) -> StoredMessage {
        StoredMessage {
            stream_sequence: seq,
            message_id: Some(id.to_string()),
            position: Some(AggregatePosition {
                aggregate_type: "order".into(),
                aggregate_id: aggregate.into(),
                sequence,
            }),
        }
    }

    #[test]
    fn agreeing_table_and_stream_are_clean() {
        let (a, b, c) = (MessageId::new(), MessageId::new(), MessageId::new());
        let rows = [row(a, "o-1", 1), row(b, "o-1", 2), row(c, "o-2", 1)];
        let messages = [
            stored(1, a, "o-1", 1),
            stored(2, c, "o-2", 1),
            stored(3, b, "o-1", 2),
        ];
        let report = reconcile(&rows, &messages, Vec::new());
        assert!(report.is_clean(), "{:?}", report.discrepancies);
        assert_eq!((report.rows_checked, report.aggregates_checked), (3, 2));
        assert_eq!(report.messages_without_row, 0);
    }

    #[test]
    fn each_disagreement_is_named() {
        let (a, b, c, d) = (
            MessageId::new(),
            MessageId::new(),
            MessageId::new(),
            MessageId::new(),
        );
        let rows = [row(a, "o-1", 1), row(b, "o-1", 2), row(c, "o-2", 1)];
        let messages = [
            stored(1, a, "o-1", 1),
            stored(2, c, "o-2", 1),
            stored(5, c, "o-2", 1), // again, after the window
            stored(6, d, "o-3", 2), // o-3 #2 before #1
            stored(7, MessageId::new(), "o-3", 1),
        ];
        let report = reconcile(&rows, &messages, Vec::new());
        assert_eq!(report.count("missing"), 1);
        assert_eq!(report.count("duplicate"), 1);
        assert_eq!(
            report.count("out-of-order"),
            1,
            "{:?}",
            report.discrepancies
        );
        assert!(matches!(&report.discrepancies[0], Discrepancy::Missing { id, .. } if *id == b));
        assert!(matches!(
            &report.discrepancies[1],
            Discrepancy::Duplicate { stream_sequences, .. } if stream_sequences == &[2, 5]
        ));
        let text = report.discrepancies[2].to_string();
        assert!(
            text.contains("order/o-3 #2 is at stream sequence 6, before #1 at stream sequence 7"),
            "{text}"
        );
        assert_eq!(report.messages_without_row, 2);
    }
}
