//! A processor in another process than the writers (PostgreSQL
//! `LISTEN/NOTIFY`) leases the messages a notification names by primary key,
//! as the in-process fast path does, instead of searching the table.

mod processor_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use outbox_core::{
    ClaimedBatch, DeadSelector, Failure, LeaseOutcome, LeaseToken, MessageId, OutboxStats,
    OutboxStore, Processor, Published, RetryPolicy, StoreError,
};
use outbox_nats::JetStreamPublisher;
use outbox_sea_orm::{PgNotifications, SeaOrmOutboxStore};
use outbox_tests::Backend;
use processor_support::{Setup, save_new_order, shared_setup, wait_until};

/// The machine's store, except that ordinary claims find nothing (and are
/// counted): whatever gets published was leased by id.
struct ClaimsByIdOnly {
    store: SeaOrmOutboxStore,
    ordinary_claims: Arc<AtomicU64>,
}

impl OutboxStore for ClaimsByIdOnly {
    async fn claim(&self, _limit: u32, lease: Duration) -> Result<ClaimedBatch, StoreError> {
        self.ordinary_claims.fetch_add(1, Ordering::Relaxed);
        self.store.claim_ids(&[], lease).await // an empty batch
    }

    async fn claim_ids(
        &self,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<ClaimedBatch, StoreError> {
        self.store.claim_ids(ids, lease).await
    }

    async fn complete(
        &self,
        token: LeaseToken,
        published: &[Published],
    ) -> Result<LeaseOutcome, StoreError> {
        self.store.complete(token, published).await
    }

    async fn fail(
        &self,
        token: LeaseToken,
        failures: &[Failure],
        policy: &RetryPolicy,
    ) -> Result<LeaseOutcome, StoreError> {
        self.store.fail(token, failures, policy).await
    }

    async fn release(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
    ) -> Result<LeaseOutcome, StoreError> {
        self.store.release(token, ids).await
    }

    async fn renew(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<LeaseOutcome, StoreError> {
        self.store.renew(token, ids, lease).await
    }

    async fn requeue_dead(&self, selector: DeadSelector) -> Result<u64, StoreError> {
        self.store.requeue_dead(selector).await
    }

    async fn purge_published(&self, older_than: Duration, batch: u32) -> Result<u64, StoreError> {
        self.store.purge_published(older_than, batch).await
    }

    async fn stats(&self) -> Result<OutboxStats, StoreError> {
        self.store.stats().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notified_messages_are_leased_by_id_in_another_process() {
    let Setup {
        test,
        stream,
        outbox,
        table,
    } = shared_setup(Backend::Postgres).await;
    // The processor's side, as another process would build it: its own
    // store and LISTEN, no commit listener, no polling to speak of.
    let ordinary_claims = Arc::new(AtomicU64::new(0));
    let store = ClaimsByIdOnly {
        store: outbox.store(),
        ordinary_claims: Arc::clone(&ordinary_claims),
    };
    let notifications = PgNotifications::new(outbox.db(), outbox.config()).expect("PostgreSQL");
    let publisher = JetStreamPublisher::new(stream.jetstream.client(), "/notify-test");
    let processor = Processor::builder(store, publisher)
        .wake_on(notifications)
        .poll_interval(Duration::from_secs(3600))
        .build()
        .expect("valid settings")
        .spawn();
    // The start-up and after-LISTEN catch-up claims.
    wait_until(Duration::from_secs(10), "the processor listens", || async {
        ordinary_claims.load(Ordering::Relaxed) >= 2
    })
    .await;

    // This outbox has no processor of its own: its commits notify.
    for i in 0..10 {
        save_new_order(&outbox, &format!("o-{i}"), 100 + i).await;
    }
    wait_until(
        Duration::from_secs(10),
        "every notified message is published",
        || async { stream.count().await == 10 },
    )
    .await;
    processor_support::wait_all_published(&test, &table, 10).await;
    processor_support::assert_all_published_cleanly(&test, &table).await;
    processor_support::assert_stream_matches_outbox(&stream, &test, &table).await;
    processor.shutdown().await.expect("clean shutdown");
}
