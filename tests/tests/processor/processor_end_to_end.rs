//! The processor end to end against the machine's PostgreSQL, MariaDB,
//! SQLite and nats-server: aggregates saved through the unit of work reach
//! the stream with the right headers and payload, exactly once, in
//! per-aggregate order.

mod processor_support;

use std::time::Duration;

use processor_support::{Setup, save_new_order, shared_setup, spawn_processor};
use txoutbox_core::ProcessorHandle;
use txoutbox_core::wire;
use txoutbox_suite::Backend;
use txoutbox_suite::jetstream::TestStream;
use txoutbox_suite::orders::Order;

async fn wait_for(stream: &TestStream, count: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while stream.count().await < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {count} messages arrived",
            stream.count().await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

txoutbox_suite::backend_tests!(saved_events_reach_the_stream_once_in_order_on:
    saved_events_reach_the_stream_once_in_order => Postgres,
    saved_events_reach_the_stream_once_in_order_on_mariadb => MySql,
    saved_events_reach_the_stream_once_in_order_on_sqlite => Sqlite,
);

/// A [`shared_setup`] on `backend` and a processor with default settings
/// publishing as `/orders-test`.
async fn orders_processor(backend: Backend) -> (Setup, ProcessorHandle) {
    let setup = shared_setup(backend).await;
    let client = setup.stream.jetstream.client();
    let processor = spawn_processor(&setup.outbox, client, "/orders-test");
    (setup, processor)
}

async fn saved_events_reach_the_stream_once_in_order_on(backend: Backend) {
    let (setup, processor) = orders_processor(backend).await;
    let (test, stream, outbox, table) = setup.into_parts();

    let repository = outbox.repository::<Order>();
    for i in 0..20 {
        let mut order = Order::place(format!("o-{i}"), 100 + i).expect("record");
        order.amend(200 + i).expect("record");
        repository.save(&mut order).await.expect("save");
    }
    wait_for(&stream, 40).await;
    tokio::time::sleep(Duration::from_millis(200)).await; // nothing more comes
    let stored = stream.messages().await;
    assert_eq!(stored.len(), 40, "each event exactly once");
    let rows = processor_support::row_ids(&test, &table, "1=1").await;
    processor_support::assert_once_in_order(&stored, &rows);

    let saved = test
        .count(&table, "status = 1 AND stream_sequence IS NOT NULL")
        .await;
    assert_eq!(
        saved, 40,
        "rows marked published with their stream sequence"
    );

    for i in 0..20 {
        let id = format!("o-{i}");
        let of_order: Vec<_> = stored
            .iter()
            .filter(|(_, m)| m.aggregate_id == id)
            .collect();
        let sequences: Vec<u64> = of_order.iter().map(|(_, m)| m.sequence).collect();
        assert_eq!(sequences, [1, 2], "per-aggregate order of {id}");
        let (_, placed) = of_order[0];
        assert_eq!(placed.event_name, "test.order.placed");
        assert_eq!(
            placed.subject,
            format!("{}.test.order.placed", stream.prefix)
        );
        assert_eq!(placed.aggregate_type, "order");
        let payload: serde_json::Value =
            serde_json::from_str(placed.payload.as_str()).expect("json");
        assert_eq!(
            payload,
            serde_json::json!({"order_id": id, "total_cents": 100 + i})
        );
        let (_, amended) = of_order[1];
        assert_eq!(amended.event_name, "test.order.amended");
        assert_eq!(
            amended.subject,
            format!("{}.test.order.amended", stream.prefix)
        );
        let payload: serde_json::Value =
            serde_json::from_str(amended.payload.as_str()).expect("json");
        assert_eq!(
            payload,
            serde_json::json!({"order_id": id, "total_cents": 200 + i})
        );
    }
    let report = processor.shutdown().await.expect("clean stop");
    assert_eq!(report.published, 40);
    assert_eq!(test.count(&table, "lease_token IS NOT NULL").await, 0);
    stream.delete().await;
}

txoutbox_suite::backend_tests!(headers_carry_the_wire_contract_on:
    headers_carry_the_wire_contract => Postgres,
    headers_carry_the_wire_contract_on_mariadb => MySql,
    headers_carry_the_wire_contract_on_sqlite => Sqlite,
);

async fn headers_carry_the_wire_contract_on(backend: Backend) {
    let (setup, processor) = orders_processor(backend).await;
    let (_test, stream, outbox, _) = setup.into_parts();
    save_new_order(&outbox, "o-h", 7).await;
    wait_for(&stream, 1).await;

    let raw = stream
        .jetstream
        .get_stream(&stream.name)
        .await
        .expect("stream")
        .get_raw_message(1)
        .await
        .expect("message 1");
    let header = |name: &str| raw.headers.get(name).map(|v| v.as_str().to_owned());
    let id = header(wire::ID).expect("ce-id");
    assert_eq!(header(wire::NATS_MSG_ID).as_deref(), Some(id.as_str()));
    assert_eq!(header(wire::SPEC_VERSION).as_deref(), Some("1.0"));
    assert_eq!(header(wire::TYPE).as_deref(), Some("test.order.placed"));
    assert_eq!(header(wire::SOURCE).as_deref(), Some("/orders-test"));
    assert_eq!(header(wire::SUBJECT).as_deref(), Some("o-h"));
    assert_eq!(header(wire::AGGREGATE_TYPE).as_deref(), Some("order"));
    assert_eq!(header(wire::SEQUENCE).as_deref(), Some("1"));
    assert_eq!(header(wire::EVENT_VERSION).as_deref(), Some("1"));
    assert_eq!(
        header(wire::CONTENT_TYPE).as_deref(),
        Some("application/json")
    );
    processor.shutdown().await.expect("clean stop");
    stream.delete().await;
}
