//! The order guarantee, checked over what a broker stored.

use std::collections::HashMap;

use txoutbox_core::{MessageId, OutboxMessage};

/// Messages of one aggregate stored out of sequence order, twice, or with
/// a gap between consecutive ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{aggregate_type} {aggregate_id}: #{sequence} (message {id}) was stored after #{previous}")]
#[non_exhaustive]
pub struct OrderViolation {
    /// The aggregate type.
    pub aggregate_type: String,
    /// The aggregate id.
    pub aggregate_id: String,
    /// The sequence stored before it.
    pub previous: u64,
    /// The sequence out of place.
    pub sequence: u64,
    /// Its message id.
    pub id: MessageId,
}

/// Per aggregate, each stored sequence is the previous one + 1 (the first
/// may be any: earlier ones may have been published before the test).
pub(crate) fn check_order(stored: &[OutboxMessage]) -> Result<(), OrderViolation> {
    let mut last: HashMap<(&str, &str), u64> = HashMap::new();
    for message in stored {
        let key = (
            message.aggregate_type.as_str(),
            message.aggregate_id.as_str(),
        );
        if let Some(&previous) = last.get(&key)
            && message.sequence != previous + 1
        {
            return Err(OrderViolation {
                aggregate_type: message.aggregate_type.clone(),
                aggregate_id: message.aggregate_id.clone(),
                previous,
                sequence: message.sequence,
                id: message.id,
            });
        }
        last.insert(key, message.sequence);
    }
    Ok(())
}
