//! The outbox's upkeep: the processor deletes published rows past their
//! age, in bounded batches, while it runs (see [`Cleanup`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cleanup::Cleanup;
use crate::store::{OutboxStore, StoreError};

/// Deletes published rows older than the age, at most the batch size per
/// statement; returns how many.
type Purge = Arc<
    dyn Fn(Duration, u32) -> Pin<Box<dyn Future<Output = Result<u64, StoreError>> + Send>>
        + Send
        + Sync,
>;

/// A store's published-row purge with its schedule.
#[derive(Clone)]
pub(super) struct PublishedCleanup {
    cleanup: Cleanup,
    purge: Purge,
}

impl std::fmt::Debug for PublishedCleanup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublishedCleanup")
            .field("cleanup", &self.cleanup)
            .finish_non_exhaustive()
    }
}

impl PublishedCleanup {
    pub(super) fn new<S: OutboxStore + Clone + 'static>(store: S, cleanup: Cleanup) -> Self {
        let purge: Purge = Arc::new(move |older_than, batch| {
            let store = store.clone();
            Box::pin(async move { store.purge_published(older_than, batch).await })
        });
        Self { cleanup, purge }
    }

    /// When and what it deletes.
    pub(super) fn schedule(&self) -> Cleanup {
        self.cleanup
    }

    /// Purges every [`Cleanup::every`] until `stop` is cancelled.
    pub(super) async fn run(self, stop: CancellationToken) {
        let purged = |rows| metrics::counter!(super::metrics::PURGED_TOTAL).increment(rows);
        self.cleanup
            .run("outbox", stop, |age, rows| (self.purge)(age, rows), purged)
            .await;
    }
}
