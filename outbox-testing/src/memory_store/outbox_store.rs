//! The [`OutboxStore`] contract on the in-memory table (with the cleanup's
//! purge).

use std::time::Duration;

use txoutbox_core::store::{
    ClaimedBatch, ClaimedMessage, Failure, Lease, LeaseOutcome, LeaseToken, OutboxStats, Published,
};
use txoutbox_core::{MessageId, OutboxStore, RetryPolicy, StoreError};

use super::row::RowLease;
use super::{MemoryStore, later};

impl MemoryStore {
    fn lease(&self, lease: Duration) -> RowLease {
        RowLease {
            token: LeaseToken::new(),
            expires_at: later(self.clock.now(), lease),
        }
    }
}

fn batch(lease: RowLease, mut messages: Vec<ClaimedMessage>, more: bool) -> ClaimedBatch {
    ClaimedMessage::sort_for_publishing(&mut messages);
    ClaimedBatch {
        lease: Lease {
            token: lease.token,
            expires_at: lease.expires_at,
        },
        messages,
        more,
    }
}

impl OutboxStore for MemoryStore {
    async fn claim(&self, limit: u32, lease: Duration) -> Result<ClaimedBatch, StoreError> {
        let lease = self.lease(lease);
        let now = self.clock.now();
        let claimed = self.table().claim(limit as usize, lease, now);
        // The table is read whole: only a claim that stopped at its limit
        // may have left publishable messages.
        let more = claimed.len() >= limit.max(1) as usize;
        Ok(batch(lease, claimed, more))
    }

    async fn claim_ids(
        &self,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<ClaimedBatch, StoreError> {
        let lease = self.lease(lease);
        let now = self.clock.now();
        let claimed = self.table().claim_ids(ids, lease, now);
        Ok(batch(lease, claimed, false))
    }

    async fn complete(
        &self,
        token: LeaseToken,
        published: &[Published],
    ) -> Result<LeaseOutcome, StoreError> {
        Ok(self.table().complete(token, published, self.clock.now()))
    }

    async fn fail(
        &self,
        token: LeaseToken,
        failures: &[Failure],
        policy: &RetryPolicy,
    ) -> Result<LeaseOutcome, StoreError> {
        Ok(self.table().fail(token, failures, policy, self.clock.now()))
    }

    async fn release(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
    ) -> Result<LeaseOutcome, StoreError> {
        Ok(self.table().release(token, ids))
    }

    async fn renew(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<LeaseOutcome, StoreError> {
        let expires_at = later(self.clock.now(), lease);
        Ok(self.table().renew(token, ids, expires_at))
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

    async fn stats(&self) -> Result<OutboxStats, StoreError> {
        Ok(self.table().stats(self.clock.now()))
    }
}
