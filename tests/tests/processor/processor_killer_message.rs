//! A message that kills every processor that publishes it (the process
//! aborts on it, as a panic under `panic = "abort"` or an out-of-memory kill
//! on a huge payload would end it). Processor processes are started one
//! after another, as a supervisor would: each claim of the message that
//! ends in a crash is counted, the message is published in ever smaller
//! isolated groups, and after `ABANDONED_LIMIT` crashes it is dead with its
//! reason; the rest of its aggregate waits visibly behind it, and every
//! other message is published, none of them dead.

mod processor_support;

use std::collections::HashSet;
use std::time::Duration;

use processor_support::{
    assert_once_in_order, processor_process, read_all, row_ids, save_order, shared_setup,
    wait_for_rows, write_orders,
};
use txoutbox_core::processor::ABANDONED_LIMIT;
use txoutbox_suite::Backend;
use txoutbox_suite::orders::Order;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_kills_its_processors_goes_dead_after_the_limit() {
    let setup = shared_setup(Backend::Postgres).await;
    let (test, stream, outbox, table) = setup.parts();
    write_orders(outbox, "a", 300, 3, 100).await;
    // The killer order: placed, then two amendments; the first amendment
    // (sequence 2) kills whoever publishes it.
    let mut killer = Order::place("killer", 1).expect("record");
    killer.amend(2).expect("record");
    killer.amend(3).expect("record");
    save_order(outbox, &mut killer).await;
    write_orders(outbox, "b", 300, 3, 100).await;
    let total = test.count(table, "1=1").await;

    let dead = "aggregate_id = 'killer' AND sequence = 2 AND status = 2";
    let mut crashes = 0;
    let survivor = loop {
        let mut process = processor_process(
            test,
            &stream.prefix,
            &["--lease-ms", "2000", "--die-on", "killer:2"],
        )
        .await;
        // Until the process dies, or the killer is dead and it lives on.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let died = loop {
            if process.exited() {
                break true;
            }
            if test.count(table, dead).await == 1 {
                break false;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the processor neither died nor sent the killer dead"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if !died {
            break process;
        }
        crashes += 1;
        assert!(
            crashes <= ABANDONED_LIMIT,
            "{crashes} crashes and the killer is not dead"
        );
    };
    println!("the killer message is dead after {crashes} crashes");
    assert_eq!(
        crashes, ABANDONED_LIMIT,
        "one crash per claim until the limit"
    );

    // Everything else is published by the surviving processor; the killer
    // order's last event waits behind its dead one, untried.
    wait_for_rows(
        test,
        table,
        "status = 1",
        total - 2,
        Duration::from_secs(60),
        "every other message is published",
    )
    .await;
    assert_eq!(
        test.count(table, "status = 2").await,
        1,
        "no innocent is dead"
    );
    assert_eq!(
        test.count(
            table,
            "aggregate_id = 'killer' AND sequence = 3 AND status = 0 AND attempts = 0 \
             AND lease_token IS NULL"
        )
        .await,
        1,
        "the rest of the aggregate waits behind the dead message"
    );
    let row = test
        .row(&format!(
            "SELECT last_error, abandoned FROM {table} \
             WHERE aggregate_id = 'killer' AND sequence = 2"
        ))
        .await;
    let error: String = row.try_get("", "last_error").expect("last_error");
    let abandoned: i32 = row.try_get("", "abandoned").expect("abandoned");
    assert!(error.contains("ended without settling it"), "{error}");
    assert_eq!(abandoned as u32, ABANDONED_LIMIT);

    // Innocent messages caught in the crashes were re-published: the
    // stream holds each once, in per-aggregate order.
    let published: HashSet<uuid::Uuid> = row_ids(test, table, "status = 1").await;
    let stored = read_all(stream).await;
    assert_once_in_order(&stored, &published);
    let report = survivor.stop();
    println!("the surviving processor: {}", report.trim());
}
