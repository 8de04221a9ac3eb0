//! The in-memory store as a [`ContractStore`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use txoutbox_core::{
    AggregateRef, MessageContext, MessageId, OutboxMessage, PendingMessage, SubjectPrefix,
};

use super::ContractWriter;
use crate::MemoryStore;

/// The event the contract writes into a [`MemoryStore`].
#[derive(Serialize, Deserialize, txoutbox_core::IntegrationEvent)]
#[event(name = "txoutbox_testing.contract.step")]
struct Step {
    n: usize,
}

/// A fresh [`MemoryStore`] and itself as its writer, for
/// [`store_contract_tests!`](crate::store_contract_tests).
pub async fn memory_store() -> (MemoryStore, MemoryStore) {
    let store = MemoryStore::new();
    (store.clone(), store)
}

fn step(n: usize) -> PendingMessage {
    PendingMessage::new(&Step { n }).unwrap_or_else(|err| {
        panic!(
            "the contract's event serializes: {}",
            txoutbox_core::ErrorChain(&err)
        )
    })
}

impl MemoryStore {
    /// Writes `steps` after the aggregate's last message, in one write.
    fn append_steps(&self, aggregate_id: &str, steps: Vec<PendingMessage>) -> Vec<MessageId> {
        let last = self
            .messages()
            .iter()
            .filter(|m| m.message.aggregate_id == aggregate_id)
            .map(|m| m.message.sequence)
            .max()
            .unwrap_or(0);
        let messages: Vec<OutboxMessage> = steps
            .into_iter()
            .zip(1u64..)
            .map(|(pending, k)| {
                let owner = AggregateRef {
                    aggregate_type: "contract".to_owned(),
                    aggregate_id: aggregate_id.to_owned(),
                    sequence: last + k,
                };
                OutboxMessage::seal(
                    pending,
                    owner,
                    &MessageContext::new(),
                    &SubjectPrefix::default(),
                )
            })
            .collect();
        self.write(messages)
            .unwrap_or_else(|err| panic!("writing the contract's messages: {err}"))
    }
}

impl ContractWriter for MemoryStore {
    async fn append(&self, aggregate_id: &str, count: usize) -> Vec<MessageId> {
        let steps = (1..=count).map(step).collect();
        self.append_steps(aggregate_id, steps)
    }

    async fn append_delayed(&self, aggregate_id: &str, delay: Duration) -> MessageId {
        let now = self.clock().now();
        let due = chrono::Duration::from_std(delay)
            .ok()
            .and_then(|delay| now.checked_add_signed(delay))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        let ids = self.append_steps(aggregate_id, vec![step(1).with_deliver_at(due)]);
        ids[0]
    }

    fn keeps_published(&self) -> bool {
        true
    }
}
