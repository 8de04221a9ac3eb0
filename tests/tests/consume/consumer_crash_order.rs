//! A consumer process killed (SIGKILL) mid-burst, with messages in flight,
//! and another started at once: what the dead process held comes back only
//! after the ack wait, while the new one receives later messages of the same
//! aggregates at once. With `keep_order` (and its inbox), every
//! aggregate's events are still applied in sequence order, each once; also
//! by a handler that takes only some of an aggregate's events (the gaps it
//! never sees do not hold it up).

#[path = "../processor/processor_support/mod.rs"]
mod processor_support;

use std::collections::HashMap;
use std::time::Duration;

use processor_support::{
    Setup, ordered_consumer, shared_setup, spawn_processor, try_consumer, wait_all_published,
    wait_until, write_orders,
};
use txoutbox_suite::Backend;

const ORDERS: usize = 200;
const EVENTS: usize = 8;

/// Writes and publishes the burst, then runs a consumer process with
/// `extra` arguments, kills it once a fifth of `expected_effects` are
/// applied, starts another, and waits until every effect is applied.
/// Returns the effects' `(aggregate, sequence)` in the order they were
/// applied, per aggregate.
async fn crash_mid_burst(
    setup: &Setup,
    extra: &[&str],
    expected_effects: i64,
) -> HashMap<String, Vec<i64>> {
    let Setup {
        test,
        stream,
        outbox,
        table,
    } = setup;
    txoutbox_suite::effects::create_table(test).await;
    let total = write_orders(outbox, "c", ORDERS, EVENTS, 50).await as i64;
    let processor = spawn_processor(outbox, stream.jetstream.client(), "/consumer-crash");
    wait_all_published(test, table, total).await;
    processor.shutdown().await.expect("clean shutdown");

    // The first consumer dies with messages in flight.
    let mut first = ordered_consumer(setup, extra).await;
    wait_until(
        Duration::from_secs(30),
        "the burst is being applied",
        || async { test.count("effects", "1=1").await >= expected_effects / 5 },
    )
    .await;
    first.kill();
    let at_kill = test.count("effects", "1=1").await;
    let second = ordered_consumer(setup, extra).await;
    wait_until(
        Duration::from_secs(60),
        "every event is applied",
        || async { test.count("effects", "1=1").await >= expected_effects },
    )
    .await;
    println!(
        "killed after {at_kill} of {expected_effects} effects; the second consumer applied the rest"
    );
    let applied = txoutbox_suite::effects::applied(test).await;
    let rows: usize = applied.values().map(Vec::len).sum();
    assert_eq!(rows as i64, expected_effects, "every effect once");
    second.stop();
    applied
}

/// Asserts that every aggregate's effects are `expected`, in that order.
fn assert_in_order(applied: &HashMap<String, Vec<i64>>, expected: &[i64]) {
    let out_of_order: Vec<(&String, &Vec<i64>)> = applied
        .iter()
        .filter(|(_, sequences)| sequences.as_slice() != expected)
        .collect();
    assert!(
        out_of_order.is_empty(),
        "{} aggregates applied out of order or not once, e.g. {:?}",
        out_of_order.len(),
        out_of_order.first()
    );
    assert_eq!(applied.len(), ORDERS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_killed_mid_burst_applies_each_aggregate_in_order_after_its_restart() {
    let setup = shared_setup(Backend::Postgres).await;
    let total = (ORDERS * EVENTS) as i64;
    let applied = crash_mid_burst(&setup, &[], total).await;
    delete_dead_letters(&setup).await;
    assert_in_order(&applied, &(1..=EVENTS as i64).collect::<Vec<_>>());
}

/// Deletes the dead-letter stream the consumer processes created.
async fn delete_dead_letters(setup: &Setup) {
    let name = txoutbox_suite::process::dead_letter_stream(&setup.stream.prefix);
    let _ = setup.stream.jetstream.delete_stream(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_of_some_events_is_not_held_up_by_the_gaps_it_never_sees() {
    let setup = shared_setup(Backend::Postgres).await;
    // Only the amendments (sequences 2..): each aggregate's sequence 1 is
    // acked unhandled, never applied.
    let total = (ORDERS * (EVENTS - 1)) as i64;
    let started = std::time::Instant::now();
    let applied = crash_mid_burst(&setup, &["--only-amended"], total).await;
    delete_dead_letters(&setup).await;
    assert_in_order(&applied, &(2..=EVENTS as i64).collect::<Vec<_>>());
    println!("done in {:?}", started.elapsed());
}

/// One reader per durable that keeps order: a second process on it is
/// refused at start, naming the ways out; a replacement for one killed
/// (SIGKILL) starts at once, its pull requests having gone with its
/// connection; processes that opt out with `--unordered` share the durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ordered_process_on_one_durable_is_refused_a_replacement_is_not() {
    let setup = shared_setup(Backend::Postgres).await;
    txoutbox_suite::effects::create_table(&setup.test).await;
    let mut first = ordered_consumer(&setup, &[]).await;
    let stream = setup
        .stream
        .jetstream
        .get_stream(&setup.stream.name)
        .await
        .expect("the stream");
    wait_until(Duration::from_secs(5), "the first one pulls", || async {
        stream
            .consumer_info("effects")
            .await
            .is_ok_and(|info| info.num_waiting > 0)
    })
    .await;
    let refused = match try_consumer(&setup, &[]).await {
        Ok(_) => panic!("a second ordered reader of the durable started"),
        Err(output) => output,
    };
    assert!(
        refused.contains("is being read by another process")
            && refused.contains("partitions(")
            && refused.contains("unordered()"),
        "{refused}"
    );

    first.kill();
    let killed = std::time::Instant::now();
    let second = try_consumer(&setup, &[])
        .await
        .expect("a replacement starts at once after a crash");
    println!(
        "second reader refused; replacement started {:.2} s after the first was killed",
        killed.elapsed().as_secs_f64()
    );
    second.stop();

    let a = try_consumer(&setup, &["--unordered"])
        .await
        .expect("an unordered reader");
    let b = try_consumer(&setup, &["--unordered"])
        .await
        .expect("unordered readers share the durable");
    a.stop();
    b.stop();
    delete_dead_letters(&setup).await;
}
