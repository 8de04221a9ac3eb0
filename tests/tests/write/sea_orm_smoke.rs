//! The write path on each backend: save an aggregate, claim its events.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::time::Duration;
use txoutbox_core::OutboxStore;
use txoutbox_sea_orm::{Outbox, OutboxConfig, SeaOrmOutboxStore};
use txoutbox_suite::TestDb;
use txoutbox_suite::orders::Order;

async fn save_then_claim(test: TestDb) {
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default());
    let orders = outbox.repository::<Order>();
    let mut order = Order::place("o-1", 100).unwrap();
    orders.save(&mut order).await.unwrap();
    order.amend(150).unwrap();
    orders.save(&mut order).await.unwrap();
    let loaded = orders.load("o-1").await.unwrap().expect("saved");
    assert_eq!(
        (
            loaded.total_cents,
            txoutbox_core::AggregateRoot::version(&loaded)
        ),
        (150, 2)
    );

    let store = SeaOrmOutboxStore::new(test.db.clone(), OutboxConfig::default());
    let batch = store.claim(10, Duration::from_secs(30)).await.unwrap();
    let seen: Vec<_> = batch
        .messages
        .iter()
        .map(|m| (m.message.event_name.as_str(), m.message.sequence))
        .collect();
    assert_eq!(seen, [("test.order.placed", 1), ("test.order.amended", 2)]);
    let again = store.claim(10, Duration::from_secs(30)).await.unwrap();
    assert!(
        again.messages.is_empty(),
        "leased messages are not handed out twice"
    );
}

txoutbox_suite::each_backend!(save_then_claim);
