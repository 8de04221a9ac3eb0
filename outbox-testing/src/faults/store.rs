//! [`FaultyStore`]: a store that fails on command.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use txoutbox_core::store::{
    ClaimedBatch, Failure, LeaseOutcome, LeaseToken, OutboxStats, Published,
};
use txoutbox_core::{MessageId, OutboxStore, RetryPolicy, StoreError};

use super::lock;

/// Wraps an [`OutboxStore`] and injects faults; clones share them.
///
/// ```
/// use txoutbox_testing::MemoryStore;
/// use txoutbox_testing::faults::FaultyStore;
///
/// let store = FaultyStore::new(MemoryStore::new());
/// store.fail_completions(2); // the database goes away after two publishes
/// store.lose_leases(1);      // the next renewal finds the lease taken over
/// ```
#[derive(Debug, Clone)]
pub struct FaultyStore<S> {
    inner: S,
    faults: Arc<Mutex<Faults>>,
}

#[derive(Debug, Default)]
struct Faults {
    failed_completions: usize,
    failed_claims: usize,
    lost_leases: usize,
    claims_find_nothing: bool,
}

/// Takes one from `counter`; whether there was one.
fn take(counter: &mut usize) -> bool {
    let had = *counter > 0;
    *counter = counter.saturating_sub(1);
    had
}

impl<S: OutboxStore> FaultyStore<S> {
    /// `inner` with no fault yet.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            faults: Arc::default(),
        }
    }

    /// The next `count` completions fail without marking anything
    /// published, as when the database stops answering after the broker
    /// acknowledged: the processor retries the completion (the rows stay
    /// leased meanwhile), so nothing is published twice unless the lease
    /// runs out first.
    pub fn fail_completions(&self, count: usize) {
        lock(&self.faults).failed_completions += count;
    }

    /// The next `count` claims fail as a database outage would.
    pub fn fail_claims(&self, count: usize) {
        lock(&self.faults).failed_claims += count;
    }

    /// The next `count` renewals report every message stale, as if another
    /// processor had taken the lease over: the batch stops publishing.
    pub fn lose_leases(&self, count: usize) {
        lock(&self.faults).lost_leases += count;
    }

    /// From now on (until [`heal`](Self::heal)), ordinary claims (those
    /// that search the table) find nothing, while claims by id work: what
    /// gets published was leased by id (a notification's fast path).
    pub fn claims_find_nothing(&self) {
        lock(&self.faults).claims_find_nothing = true;
    }

    /// Removes every fault.
    pub fn heal(&self) {
        *lock(&self.faults) = Faults::default();
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: OutboxStore> OutboxStore for FaultyStore<S> {
    async fn claim(&self, limit: u32, lease: Duration) -> Result<ClaimedBatch, StoreError> {
        if take(&mut lock(&self.faults).failed_claims) {
            return Err(StoreError::msg("injected: the database is unreachable"));
        }
        if lock(&self.faults).claims_find_nothing {
            return self.inner.claim_ids(&[], lease).await; // an empty batch
        }
        self.inner.claim(limit, lease).await
    }

    async fn claim_ids(
        &self,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<ClaimedBatch, StoreError> {
        self.inner.claim_ids(ids, lease).await
    }

    async fn complete(
        &self,
        token: LeaseToken,
        published: &[Published],
    ) -> Result<LeaseOutcome, StoreError> {
        if take(&mut lock(&self.faults).failed_completions) {
            return Err(StoreError::msg(
                "injected: the completion did not reach the database",
            ));
        }
        self.inner.complete(token, published).await
    }

    async fn fail(
        &self,
        token: LeaseToken,
        failures: &[Failure],
        policy: &RetryPolicy,
    ) -> Result<LeaseOutcome, StoreError> {
        self.inner.fail(token, failures, policy).await
    }

    async fn release(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
    ) -> Result<LeaseOutcome, StoreError> {
        self.inner.release(token, ids).await
    }

    async fn renew(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<LeaseOutcome, StoreError> {
        if take(&mut lock(&self.faults).lost_leases) {
            return Ok(LeaseOutcome::new(0, ids.len() as u64));
        }
        self.inner.renew(token, ids, lease).await
    }

    async fn purge_published(
        &self,
        older_than: Duration,
        batch_size: u32,
    ) -> Result<u64, StoreError> {
        self.inner.purge_published(older_than, batch_size).await
    }

    async fn stats(&self) -> Result<OutboxStats, StoreError> {
        self.inner.stats().await
    }
    async fn probe(&self) -> Result<(), StoreError> {
        self.inner.probe().await
    }
    async fn check_schema(&self) -> Result<(), StoreError> {
        self.inner.check_schema().await
    }
}
