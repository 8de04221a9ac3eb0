//! A processor in another process than the writers (PostgreSQL
//! `LISTEN/NOTIFY`) leases the messages a notification names by primary key,
//! as the in-process fast path does, instead of searching the table.

mod processor_support;

use std::sync::Arc;
use std::time::Duration;

use processor_support::{BuildAndSpawn, save_new_order, shared_setup, wait_until};
use txoutbox_core::Processor;
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::PgNotifications;
use txoutbox_suite::Backend;
use txoutbox_testing::counting::CountingStore;
use txoutbox_testing::faults::FaultyStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notified_messages_are_leased_by_id_in_another_process() {
    let (test, stream, outbox, table) = shared_setup(Backend::Postgres).await.into_parts();
    // The processor's side, as another process would build it: its own
    // store and LISTEN, no commit listener, no polling to speak of.
    let finding_nothing = FaultyStore::new(outbox.store());
    finding_nothing.claims_find_nothing();
    let store = CountingStore::new(finding_nothing, Arc::default());
    let calls = store.calls();
    let notifications = PgNotifications::new(outbox.db(), outbox.config()).expect("PostgreSQL");
    let publisher = JetStreamPublisher::new(stream.jetstream.client(), "/notify-test");
    let processor = Processor::builder(store, publisher)
        .wake_on(notifications)
        .poll_interval(Duration::from_secs(3600))
        .build_and_spawn();
    // The start-up and after-LISTEN catch-up claims (a precondition, not a
    // measurement: generous for a loaded machine, where 10 s once passed
    // without them).
    wait_until(Duration::from_secs(30), "the processor listens", || async {
        calls.claim.calls() >= 2
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
