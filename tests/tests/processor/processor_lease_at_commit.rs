//! PostgreSQL, processor in the writers' process: the unit of work writes
//! outbox rows already leased to that processor, which publishes them
//! without a claim; unless an earlier message of the aggregate is
//! unpublished (order first); and a processor that stops gives back what it
//! was handed and did not publish.

mod processor_support;

use std::time::Duration;

use processor_support::{
    BuildAndSpawn, Gated, Setup, begin_with_order, save_new_order, shared_setup,
};
use txoutbox_nats::JetStreamPublisher;
use txoutbox_suite::{Backend, TestDb};

/// For each outbox row of `order` (by sequence): whether it is leased, and
/// whether the transaction that wrote the order row wrote its current
/// version (so no claim has updated it since).
async fn rows_of(test: &TestDb, table: &str, order: &str) -> Vec<(bool, bool)> {
    let rows = test
        .rows(&format!(
            "SELECT m.lease_token IS NOT NULL AS leased, m.xmin::text = o.xmin::text AS same_txn \
             FROM {table} m JOIN orders o ON o.id = m.aggregate_id \
             WHERE m.aggregate_id = '{order}' ORDER BY m.sequence"
        ))
        .await;
    rows.iter()
        .map(|row| {
            (
                row.try_get("", "leased").expect("leased"),
                row.try_get("", "same_txn").expect("same_txn"),
            )
        })
        .collect()
}

/// A PostgreSQL setup and a running processor in the writers' process whose
/// publishes wait at a closed gate (one batch in flight at a time), with
/// new order `first` saved and its publish held at the gate.
async fn gated_setup(first: &str) -> (Setup, Gated, txoutbox_core::ProcessorHandle) {
    let setup = shared_setup(Backend::Postgres).await;
    let publisher = Gated::closed(JetStreamPublisher::new(
        setup.stream.jetstream.client(),
        "/lease-at-commit",
    ));
    let processor = setup
        .outbox
        .processor(publisher.clone())
        .batches_in_flight(1)
        .shutdown_timeout(Duration::from_millis(300))
        .build_and_spawn();
    processor_support::wait_until(
        Duration::from_secs(10),
        "the processor takes commits leased",
        || async { setup.outbox.processor_takes_commits() },
    )
    .await;
    save_new_order(&setup.outbox, first, 100).await;
    publisher.wait_for_waiting(1).await;
    (setup, publisher, processor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_are_leased_to_the_local_processor_and_published_without_a_claim() {
    let (setup, publisher, processor) = gated_setup("o-1").await;
    let (test, stream, outbox, table) = setup.into_parts();
    assert_eq!(
        rows_of(&test, &table, "o-1").await,
        vec![(true, true)],
        "leased by the commit itself, not by a claim"
    );

    // The order's next event waits behind the unpublished first one: it is
    // written unleased, and no claim may take it while the first is out.
    let (mut uow, mut order) = begin_with_order(&outbox, "o-1").await;
    order.amend(150).expect("record");
    uow.save(&mut order).await.expect("save");
    uow.commit().await.expect("commit");
    // What the commit wrote, as it wrote it: no claim can have run since,
    // as the processor's only batch slot is taken by o-1's first event,
    // held at the gate.
    assert_eq!(
        rows_of(&test, &table, "o-1").await,
        vec![(true, false), (false, true)],
        "the second event is not leased while the first is unpublished"
    );

    publisher.open();
    processor_support::wait_all_published(&test, &table, 2).await;
    processor_support::assert_all_published_cleanly(&test, &table).await;
    processor_support::assert_stream_matches_outbox(&stream, &test, &table).await;
    processor.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_processor_gives_back_what_it_was_handed() {
    // One batch publishing (held at the gate), the other orders handed over
    // and waiting for it.
    let (setup, _publisher, processor) = gated_setup("o-0").await;
    let (test, _, outbox, table) = setup.into_parts();
    for i in 1..5 {
        save_new_order(&outbox, &format!("o-{i}"), 100).await;
    }
    assert_eq!(
        test.count(&table, "lease_token IS NOT NULL").await,
        5,
        "every order was leased at commit"
    );

    let report = processor.shutdown().await.expect("clean shutdown");
    assert_eq!(report.published, 0);
    assert_eq!(report.released, 5, "{report:?}");
    assert_eq!(
        test.count(
            &table,
            "status = 0 AND attempts = 0 AND lease_token IS NULL"
        )
        .await,
        5,
        "all pending again, nothing leased, no attempt spent"
    );

    // Commits after the processor stopped are written unleased.
    save_new_order(&outbox, "o-after", 100).await;
    assert_eq!(test.count(&table, "lease_token IS NOT NULL").await, 0);
}
