//! The in-memory store as a [`ContractStore`].

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

impl ContractWriter for MemoryStore {
    async fn append(&self, aggregate_id: &str, count: usize) -> Vec<MessageId> {
        let last = self
            .messages()
            .iter()
            .filter(|m| m.message.aggregate_id == aggregate_id)
            .map(|m| m.message.sequence)
            .max()
            .unwrap_or(0);
        let messages: Vec<OutboxMessage> = (1..=count)
            .map(|k| {
                let pending = PendingMessage::new(&Step { n: k }).unwrap_or_else(|err| {
                    panic!(
                        "the contract's event serializes: {}",
                        txoutbox_core::ErrorChain(&err)
                    )
                });
                let owner = AggregateRef {
                    aggregate_type: "contract".to_owned(),
                    aggregate_id: aggregate_id.to_owned(),
                    sequence: last + k as u64,
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

    fn keeps_published(&self) -> bool {
        true
    }
}
