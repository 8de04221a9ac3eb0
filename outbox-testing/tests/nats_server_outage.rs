//! A private nats-server killed and restarted while a service writes: the
//! kit's `NatsServer` with the real JetStream publisher and processor.

#![cfg(feature = "nats-server")]
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashMap;
use std::time::Duration;

use support::Order;
use txoutbox_nats::{JetStreamPublisher, StreamSpec};
use txoutbox_testing::TestOutbox;
use txoutbox_testing::nats::NatsServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_crash_while_writes_go_on_loses_nothing_and_keeps_order() {
    let mut server = NatsServer::start().await.unwrap();
    let client = server.connect().await.unwrap();
    let jetstream = async_nats::jetstream::new(client.clone());
    StreamSpec::new("KIT", ["events.>"])
        .processor_lease(Duration::from_secs(3))
        .ensure(&jetstream)
        .await
        .unwrap();
    let publisher = JetStreamPublisher::new(client, "/kit");
    let outbox = TestOutbox::with_publisher(publisher.clone());
    let processor = txoutbox_core::Processor::builder(outbox.store().clone(), publisher)
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap()
        .spawn();

    let writer = {
        let outbox = outbox.clone();
        tokio::spawn(async move {
            let mut orders: Vec<Order> = (0..4)
                .map(|k| Order::place(&format!("o-{k}"), 0).unwrap())
                .collect();
            for round in 1..=15 {
                for order in &mut orders {
                    outbox.save(order).unwrap();
                    order.amend(round).unwrap();
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !outbox.store().published().is_empty(),
        "publishing before the crash"
    );
    server.kill();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let waiting = outbox.store().pending().len();
    assert!(waiting > 0, "writes went on while the broker was down");
    server.restart().await.unwrap();
    writer.await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !outbox.store().pending().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not drained after the restart"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    processor.shutdown().await.unwrap();

    let published = outbox.store().messages();
    assert_eq!(published.len(), 60, "every save committed");
    assert!(outbox.store().pending().is_empty(), "and published");
    let mut stream = jetstream.get_stream("KIT").await.unwrap();
    assert_eq!(
        stream.info().await.unwrap().state.messages,
        60,
        "each stored once"
    );
    let mut last: HashMap<&str, u64> = HashMap::new();
    for row in &published {
        let sequence = row.stream_sequence.unwrap();
        if let Some(&before) = last.get(row.message.aggregate_id.as_str()) {
            assert!(
                sequence > before,
                "{} out of order in the stream",
                row.message.aggregate_id
            );
        }
        last.insert(&row.message.aggregate_id, sequence);
    }
}
