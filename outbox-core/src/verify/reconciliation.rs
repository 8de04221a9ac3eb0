//! The comparison itself: [`reconcile`] and what it returns.

use std::collections::{BTreeMap, HashMap};

use super::discrepancy::Discrepancy;
use super::records::{PublishedRecord, StalePending, StreamedMessage};

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
    messages: &[StreamedMessage],
    stale: Vec<StalePending>,
) -> Reconciliation {
    let mut sorted: Vec<&StreamedMessage> = messages.iter().collect();
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
    use crate::id::MessageId;
    use crate::verify::AggregatePosition;

    fn row(id: MessageId, aggregate: &str, sequence: u64) -> PublishedRecord {
        PublishedRecord {
            id,
            aggregate_type: "order".into(),
            aggregate_id: aggregate.into(),
            sequence,
            stream_sequence: None,
        }
    }

    fn stored(seq: u64, id: MessageId, aggregate: &str, sequence: u64) -> StreamedMessage {
        StreamedMessage {
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
