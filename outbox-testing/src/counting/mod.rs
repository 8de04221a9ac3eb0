//! [`CountingStore`]: a store that counts and times every call the
//! processor makes, to wait for claims rather than for time, or to measure
//! what a run cost.
//!
//! ```
//! use std::sync::Arc;
//! use txoutbox_testing::MemoryStore;
//! use txoutbox_testing::counting::CountingStore;
//!
//! let store = CountingStore::new(MemoryStore::new(), Arc::default());
//! let calls = store.calls(); // read while the processor runs
//! assert_eq!(calls.claim.calls(), 0);
//! ```

mod calls;

pub use calls::{CallCount, CallFigures, StoreCalls};

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use txoutbox_core::store::{
    ClaimedBatch, Failure, LeaseOutcome, LeaseToken, OutboxStats, Published,
};
use txoutbox_core::{MessageId, OutboxStore, RetryPolicy, StoreError};

/// Wraps an [`OutboxStore`], forwarding every call unchanged and counting
/// it (calls, rows, time) into its [`StoreCalls`]; the cleanup's purge, the
/// probe and the schema check are forwarded uncounted.
#[derive(Debug)]
pub struct CountingStore<S> {
    inner: S,
    calls: Arc<StoreCalls>,
}

impl<S> CountingStore<S> {
    /// Counts `inner`'s calls into `calls`.
    pub fn new(inner: S, calls: Arc<StoreCalls>) -> Self {
        Self { inner, calls }
    }

    /// The counts, live.
    pub fn calls(&self) -> Arc<StoreCalls> {
        Arc::clone(&self.calls)
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

/// Runs `call`, recording it on `count` with the rows `rows` says it touched.
async fn timed<T>(
    count: &CallCount,
    call: impl Future<Output = Result<T, StoreError>>,
    rows: impl FnOnce(&T) -> u64,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let result = call.await;
    count.record(result.as_ref().map_or(0, rows), started.elapsed());
    result
}

fn claimed(batch: &ClaimedBatch) -> u64 {
    batch.messages.len() as u64
}

fn applied(outcome: &LeaseOutcome) -> u64 {
    outcome.applied
}

impl<S: OutboxStore> OutboxStore for CountingStore<S> {
    async fn claim(&self, limit: u32, lease: Duration) -> Result<ClaimedBatch, StoreError> {
        // One measurement for both figures: the method's total and the
        // claim's own series.
        let started = Instant::now();
        let batch = self.inner.claim(limit, lease).await;
        let took = started.elapsed();
        self.calls
            .claim
            .record(batch.as_ref().map_or(0, claimed), took);
        self.calls.claim_took(took);
        batch
    }

    async fn claim_ids(
        &self,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<ClaimedBatch, StoreError> {
        let call = self.inner.claim_ids(ids, lease);
        timed(&self.calls.claim_ids, call, claimed).await
    }

    async fn complete(
        &self,
        token: LeaseToken,
        published: &[Published],
    ) -> Result<LeaseOutcome, StoreError> {
        let call = self.inner.complete(token, published);
        timed(&self.calls.complete, call, applied).await
    }

    async fn fail(
        &self,
        token: LeaseToken,
        failures: &[Failure],
        policy: &RetryPolicy,
    ) -> Result<LeaseOutcome, StoreError> {
        let call = self.inner.fail(token, failures, policy);
        timed(&self.calls.fail, call, applied).await
    }

    async fn release(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
    ) -> Result<LeaseOutcome, StoreError> {
        let call = self.inner.release(token, ids);
        timed(&self.calls.release, call, applied).await
    }

    async fn renew(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<LeaseOutcome, StoreError> {
        let call = self.inner.renew(token, ids, lease);
        timed(&self.calls.renew, call, applied).await
    }

    async fn purge_published(
        &self,
        older_than: Duration,
        batch_size: u32,
    ) -> Result<u64, StoreError> {
        self.inner.purge_published(older_than, batch_size).await
    }

    async fn stats(&self) -> Result<OutboxStats, StoreError> {
        timed(&self.calls.stats, self.inner.stats(), |_| 0).await
    }
    async fn probe(&self) -> Result<(), StoreError> {
        self.inner.probe().await
    }
    async fn check_schema(&self) -> Result<(), StoreError> {
        self.inner.check_schema().await
    }
}
