//! A poison message: an event larger than the server's `max_payload` (a
//! private nats-server started with `max_payload: 4096`). It is rejected on
//! every attempt, backs off, and goes `dead` with the reason after the
//! configured attempts; the messages of other aggregates are published
//! meanwhile, and the later messages of the poisoned aggregate are held back.

mod processor_support;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use processor_support::{
    AttachmentAdded, BuildAndSpawn, amend_order, assert_once_in_order, poison_server,
    private_setup, read_all, row_ids, save_order, wait_for_rows, wait_until, write_orders,
};
use txoutbox_core::{AggregateRoot, Processor, RetryPolicy};
use txoutbox_nats::JetStreamPublisher;
use txoutbox_suite::orders::Order;
use txoutbox_suite::{Backend, TestDb};
use txoutbox_testing::counting::CountingStore;
use uuid::Uuid;

const MAX_ATTEMPTS: u32 = 3;

async fn a_poison_message_goes_dead_and_holds_back_only_its_aggregate(backend: Backend) {
    let server = poison_server().await;
    let (test, stream, outbox, table) =
        private_setup(&server, backend, "poison").await.into_parts();
    // Counting its claims (woken by this process's commits), to wait for
    // claims rather than for time.
    let store = CountingStore::new(outbox.store(), Arc::default());
    let calls = store.calls();
    let publisher = JetStreamPublisher::new(
        server
            .connect()
            .await
            .expect("a client of the private nats-server"),
        "/poison-test",
    );
    let processor = Processor::builder(store, publisher)
        .wake_on(outbox.listen())
        .retry(RetryPolicy::new(
            MAX_ATTEMPTS,
            Duration::from_millis(50),
            Duration::from_secs(1),
        ))
        .poll_interval(Duration::from_millis(100))
        .build_and_spawn();

    // The poisoned aggregate: placed (fine), an attachment over max_payload,
    // then amended (fine, but behind the poison). Others around it.
    write_orders(&outbox, "before", 10, 2, 5).await;
    let mut poisoned = Order::place("poisoned", 1).expect("record");
    poisoned.record(AttachmentAdded::poison()).expect("record");
    poisoned.amend(2).expect("record");
    save_order(&outbox, &mut poisoned).await;
    write_orders(&outbox, "after", 10, 2, 5).await;

    let poison = "aggregate_id = 'poisoned' AND sequence = 2";
    wait_for_rows(
        &test,
        &table,
        &format!("{poison} AND status = 2"),
        1,
        Duration::from_secs(15),
        "the poison message is dead",
    )
    .await;
    assert_eq!(
        test.count(&table, &format!("{poison} AND attempts = {MAX_ATTEMPTS}"))
            .await,
        1,
        "dead after exactly the configured attempts"
    );
    let error = last_error(&test, &table, poison).await;
    assert!(
        error.contains("max_payload"),
        "the reason is kept on the row: {error:?}"
    );

    // Everyone else is published: 40 messages and the poisoned order's first.
    wait_for_rows(
        &test,
        &table,
        "status = 1",
        41,
        Duration::from_secs(15),
        "the other aggregates are published",
    )
    .await;
    assert_eq!(
        test.count(
            &table,
            "aggregate_id = 'poisoned' AND sequence = 1 AND status = 1"
        )
        .await,
        1
    );

    // Later messages of the poisoned aggregate, old and new, stay behind it
    // while new work of other aggregates flows.
    amend_order(&outbox, "poisoned", 1).await;
    write_orders(&outbox, "later", 5, 2, 5).await;
    wait_for_rows(
        &test,
        &table,
        "status = 1",
        51,
        Duration::from_secs(15),
        "later work is published",
    )
    .await;
    // Several ordinary claims after the later work was committed: none of
    // them may take what waits behind the dead message.
    let seen = calls.claim.calls();
    wait_until(Duration::from_secs(10), "three more claims ran", || async {
        calls.claim.calls() >= seen + 3
    })
    .await;
    assert_eq!(
        test.count(
            &table,
            "aggregate_id = 'poisoned' AND sequence > 2 AND status = 0 AND attempts = 0 \
             AND lease_token IS NULL"
        )
        .await,
        2,
        "the poisoned aggregate's later messages are held back, untried"
    );

    let report = processor.shutdown().await.expect("clean stop");
    assert_eq!(
        (report.published, report.failed, report.dead),
        (51, u64::from(MAX_ATTEMPTS), 1),
        "{report:?}"
    );
    let published: HashSet<Uuid> = row_ids(&test, &table, "status = 1").await;
    assert_once_in_order(&read_all(&stream).await, &published);
    stream.delete().await;
}

async fn last_error(test: &TestDb, table: &str, filter: &str) -> String {
    test.row(&format!("SELECT last_error FROM {table} WHERE {filter}"))
        .await
        .try_get::<Option<String>>("", "last_error")
        .expect("last_error")
        .unwrap_or_default()
}

txoutbox_suite::backend_tests!(a_poison_message_goes_dead_and_holds_back_only_its_aggregate:
    a_poison_message_goes_dead_on_postgres => Postgres,
    a_poison_message_goes_dead_on_mariadb => MySql,
    a_poison_message_goes_dead_on_sqlite => Sqlite,
);
