//! The [`OutboxAdmin`] contract on the in-memory table: an operator's
//! requeue, skip and purge.

use std::time::Duration;

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

    async fn purge_published(
        &self,
        older_than: Duration,
        _batch_size: u32,
    ) -> Result<u64, StoreError> {
        let before = chrono::Duration::from_std(older_than)
            .ok()
            .and_then(|by| self.clock.now().checked_sub_signed(by))
            .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
        Ok(self.table().purge_published(before))
    }
}
