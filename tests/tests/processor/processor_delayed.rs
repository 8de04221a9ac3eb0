//! Delayed messages (`record_delayed`), on PostgreSQL, MariaDB and SQLite
//! with a real processor and JetStream: a delayed event is not published
//! before it is due, the later events of its aggregate wait behind it (so
//! the stream keeps sequence order), and other aggregates flow meanwhile.

mod processor_support;

use std::time::Duration;

use chrono::Utc;
use processor_support::{read_all, save_new_order, shared_setup, spawn_processor, wait_until};
use tokio::time::Instant;
use txoutbox_core::AggregateRoot;
use txoutbox_suite::Backend;
use txoutbox_suite::orders::{Order, OrderAmended};

const DELAY: Duration = Duration::from_secs(2);

/// `(aggregate id, sequence)` of every stored message, in stream order.
async fn stored(setup: &processor_support::Setup) -> Vec<(String, u64)> {
    read_all(&setup.stream)
        .await
        .into_iter()
        .map(|(_, message)| (message.aggregate_id, message.sequence))
        .collect()
}

async fn a_delayed_event_holds_its_aggregate_until_due(backend: Backend) {
    let setup = shared_setup(backend).await;
    let processor = spawn_processor(&setup.outbox, setup.stream.jetstream.client(), "/delayed");
    // Running, so that (on PostgreSQL) commits are offered to it leased.
    wait_until(
        Duration::from_secs(5),
        "the processor serves commits",
        || async { setup.outbox.processor_takes_commits() },
    )
    .await;

    // o-1: placed now, a reminder in 2 s, then an amendment recorded now.
    let mut order = Order::place("o-1", 100).expect("record");
    order
        .record_delayed(
            OrderAmended {
                order_id: "o-1".into(),
                total_cents: 150,
            },
            Utc::now() + chrono::Duration::from_std(DELAY).expect("delay"),
        )
        .expect("record");
    order.amend(200).expect("record");
    let saved = Instant::now();
    setup
        .outbox
        .repository::<Order>()
        .save(&mut order)
        .await
        .expect("save");
    save_new_order(&setup.outbox, "o-2", 5).await;

    // What is due flows: o-1's first event and o-2; o-1's later events wait.
    wait_until(Duration::from_secs(10), "the due events", || async {
        setup.stream.count().await >= 2
    })
    .await;
    tokio::time::sleep(DELAY / 2).await;
    let early = stored(&setup).await;
    assert!(
        saved.elapsed() < DELAY,
        "the machine is too slow for this check"
    );
    assert_eq!(
        early.len(),
        2,
        "nothing of o-1 past its delayed event: {early:?}"
    );
    assert!(early.contains(&("o-1".to_owned(), 1)));
    assert!(early.contains(&("o-2".to_owned(), 1)));

    // Due: the delayed event, then the one behind it, in sequence order.
    wait_until(Duration::from_secs(15), "the delayed events", || async {
        setup.stream.count().await >= 4
    })
    .await;
    assert!(saved.elapsed() >= DELAY, "published before it was due");
    let o1: Vec<u64> = stored(&setup)
        .await
        .into_iter()
        .filter(|(id, _)| id == "o-1")
        .map(|(_, sequence)| sequence)
        .collect();
    assert_eq!(o1, [1, 2, 3]);
    processor.shutdown().await.expect("clean shutdown");
    setup.stream.delete().await;
}

txoutbox_suite::each_backend!(empty: a_delayed_event_holds_its_aggregate_until_due);
