//! The [`OutboxAdmin`] contract on the in-memory table: an operator's
//! requeue and skip (the purge is
//! [`OutboxStore`](txoutbox_core::OutboxStore)'s, as the processor's
//! cleanup calls it).

use txoutbox_core::store::OutboxAdmin;
use txoutbox_core::store::{DeadSelector, SkipNote};
use txoutbox_core::{MessageId, StoreError};

use super::MemoryStore;

impl OutboxAdmin for MemoryStore {
    async fn requeue_dead(&self, selector: DeadSelector) -> Result<u64, StoreError> {
        Ok(self.table().requeue_dead(&selector, self.clock.now()))
    }

    async fn skip_dead(&self, id: MessageId, note: &SkipNote) -> Result<bool, StoreError> {
        Ok(self.table().skip_dead(id, note, self.clock.now()))
    }
}
