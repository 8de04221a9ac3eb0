//! A consumer process killed (SIGKILL) mid-burst, with messages in flight,
//! and another started at once: what the dead process held would come back
//! only after the ack wait, while the new one receives later messages of the
//! same aggregates at once. An ordered subscriber (inbox handlers) hands
//! the dead process's messages back at its start, so they come back at
//! once; every aggregate's events are applied in sequence order, each once;
//! also by a handler that takes only some of an aggregate's events (the
//! gaps it never sees do not hold it up). With the library's default ack
//! wait (30 s), every aggregate moves again within seconds of the restart.

#[path = "../processor/processor_support/mod.rs"]
mod processor_support;

use std::collections::HashMap;
use std::time::Duration;

use processor_support::{
    Setup, amend_order, default_consumer, ordered_consumer, shared_setup, spawn_processor,
    try_consumer, wait_all_published, wait_until, write_orders,
};
use txoutbox_core::wire;
use txoutbox_suite::Backend;

const ORDERS: usize = 200;
const EVENTS: usize = 8;
const BURST: Burst = Burst {
    orders: ORDERS,
    events: EVENTS,
};

/// A burst: `orders` aggregates with `events` events each.
#[derive(Debug, Clone, Copy)]
struct Burst {
    orders: usize,
    events: usize,
}

impl Burst {
    /// The sequences the consumer applies of each aggregate: all, or all
    /// but the first (`--only-amended`).
    fn applied(self, only_amended: bool) -> Vec<i64> {
        let first = if only_amended { 2 } else { 1 };
        (first..=self.events as i64).collect()
    }
}

/// How the consumer processes run.
#[derive(Debug, Clone, Copy)]
enum Consumer<'a> {
    /// Ack wait 3 s, with these extra arguments (see the binary).
    Short(&'a [&'a str]),
    /// Every setting the library's default (ack wait 30 s).
    Default,
}

impl Consumer<'_> {
    /// Whether it applies only the amendments (`--only-amended`).
    fn only_amended(self) -> bool {
        matches!(self, Consumer::Short(extra) if extra.contains(&"--only-amended"))
    }

    async fn start(self, setup: &Setup) -> txoutbox_suite::process::ProcessorProcess {
        match self {
            Consumer::Short(extra) => ordered_consumer(setup, extra).await,
            Consumer::Default => default_consumer(setup).await,
        }
    }
}

/// What a crash mid-burst left.
struct AfterCrash {
    /// The effects' sequences in the order they were applied, per aggregate.
    applied: HashMap<String, Vec<i64>>,
    /// From the second process's start until every event the dead process
    /// had received and not applied was applied: every aggregate it held
    /// moves again.
    moving_in: Duration,
}

/// Writes and publishes `burst`, then runs a consumer process, kills it
/// once a fifth of the effects are applied, starts another at once, and
/// waits until every effect is applied.
async fn crash_mid_burst(setup: &Setup, burst: Burst, consumer: Consumer<'_>) -> AfterCrash {
    let applies = burst.applied(consumer.only_amended());
    let expected_effects = (burst.orders * applies.len()) as i64;
    let Setup {
        test,
        stream,
        outbox,
        table,
    } = setup;
    txoutbox_suite::effects::create_table(test).await;
    let total = write_orders(outbox, "c", burst.orders, burst.events, 50).await as i64;
    let processor = spawn_processor(outbox, stream.jetstream.client(), "/consumer-crash");
    wait_all_published(test, table, total).await;
    processor.shutdown().await.expect("clean shutdown");

    // The first consumer dies with messages in flight.
    let mut first = consumer.start(setup).await;
    wait_until(
        Duration::from_secs(30),
        "the burst is being applied",
        || async { test.count("effects", "1=1").await >= expected_effects / 5 },
    )
    .await;
    first.kill();
    let at_kill = test.count("effects", "1=1").await;
    let held = held_by_the_dead(setup, &applies).await;
    let restarted = std::time::Instant::now();
    let second = consumer.start(setup).await;
    wait_until(
        Duration::from_secs(60),
        "every event the dead process held is applied",
        || async {
            let now = txoutbox_suite::effects::applied(test).await;
            eprintln!(
                "TIMELINE {:.2} {} {}",
                restarted.elapsed().as_secs_f64(),
                now.values().map(Vec::len).sum::<usize>(),
                held.iter()
                    .filter(|(a, s)| !now.get(a).is_some_and(|v| v.contains(s)))
                    .count()
            );
            held.iter().all(|(aggregate, sequence)| {
                now.get(aggregate)
                    .is_some_and(|applied| applied.contains(sequence))
            })
        },
    )
    .await;
    let moving_in = restarted.elapsed();
    wait_until(
        Duration::from_secs(60),
        "every event is applied",
        || async { test.count("effects", "1=1").await >= expected_effects },
    )
    .await;
    let recovered_in = restarted.elapsed();
    println!(
        "killed after {at_kill} of {expected_effects} effects; after the second consumer's \
         start the {} events the dead process held were applied within {:.2} s, and every effect was \
         applied within {:.2} s",
        held.len(),
        moving_in.as_secs_f64(),
        recovered_in.as_secs_f64()
    );
    let applied = txoutbox_suite::effects::applied(test).await;
    let rows: usize = applied.values().map(Vec::len).sum();
    assert_eq!(rows as i64, expected_effects, "every effect once");
    second.stop();
    AfterCrash { applied, moving_in }
}

/// The events the dead process had received and not applied, as
/// `(aggregate, sequence)`: the stream's messages between the consumer's
/// ack floor and its last delivery whose sequence it `applies`, less those
/// applied.
async fn held_by_the_dead(setup: &Setup, applies: &[i64]) -> Vec<(String, i64)> {
    let stream = setup.jetstream_stream().await;
    let info = stream.consumer_info("effects").await.expect("the consumer");
    let applied = txoutbox_suite::effects::applied(&setup.test).await;
    let mut held = Vec::new();
    for sequence in info.ack_floor.stream_sequence + 1..=info.delivered.stream_sequence {
        let message = stream.get_raw_message(sequence).await.expect("a message");
        let header = |name: &str| message.headers.get(name).map(|value| value.to_string());
        let aggregate = header(wire::SUBJECT).expect("an aggregate");
        let event: i64 = header(wire::SEQUENCE)
            .and_then(|value| value.parse().ok())
            .expect("a sequence");
        if applies.contains(&event)
            && !applied
                .get(&aggregate)
                .is_some_and(|sequences| sequences.contains(&event))
        {
            held.push((aggregate, event));
        }
    }
    held
}

/// Asserts that every aggregate's effects are `expected`, in that order.
fn assert_in_order(applied: &HashMap<String, Vec<i64>>, orders: usize, expected: &[i64]) {
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
    assert_eq!(applied.len(), orders);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_killed_mid_burst_applies_each_aggregate_in_order_after_its_restart() {
    let setup = shared_setup(Backend::Postgres).await;
    let after = crash_mid_burst(&setup, BURST, Consumer::Short(&[])).await;
    delete_dead_letters(&setup).await;
    assert_in_order(
        &after.applied,
        ORDERS,
        &(1..=EVENTS as i64).collect::<Vec<_>>(),
    );
}

/// The same with the consumer applying each message in a transaction of
/// its own (`inbox_per_message`; the test above kills it in the middle of
/// inbox groups, the default: a transaction holding many aggregates'
/// messages rolls back with it); after the restart every aggregate's
/// events are applied once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_applying_each_message_alone_killed_mid_burst_applies_them_in_order() {
    let setup = shared_setup(Backend::Postgres).await;
    let after = crash_mid_burst(&setup, BURST, Consumer::Short(&["--inbox-per-message"])).await;
    delete_dead_letters(&setup).await;
    assert_in_order(
        &after.applied,
        ORDERS,
        &(1..=EVENTS as i64).collect::<Vec<_>>(),
    );
}

/// With every setting the library's default (ack wait 30 s) and 2,000
/// aggregates, nearly every one of them with a message the dead process
/// held: the restarted process hands those back at once, so everything is
/// applied, in order and once, within seconds, not after the ack wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_killed_mid_burst_moves_every_aggregate_again_well_before_the_ack_wait() {
    moves_again_well_before_the_ack_wait(Backend::Postgres).await;
}

/// The same on MariaDB: the inbox, the order bookkeeping and the hand-back
/// do not depend on the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_killed_mid_burst_moves_every_aggregate_again_on_mariadb() {
    moves_again_well_before_the_ack_wait(Backend::MySql).await;
}

async fn moves_again_well_before_the_ack_wait(backend: Backend) {
    const WIDE: Burst = Burst {
        orders: 2_000,
        events: 3,
    };
    let setup = shared_setup(backend).await;
    let after = crash_mid_burst(&setup, WIDE, Consumer::Default).await;
    delete_dead_letters(&setup).await;
    assert_in_order(&after.applied, WIDE.orders, &[1, 2, 3]);
    // Without the hand-back the messages the dead process held come back
    // after the 30 s ack wait, and their aggregates wait for them.
    assert!(
        after.moving_in < Duration::from_secs(15),
        "the events the dead process held were applied only {:?} after the restart: the \
         consumer waited for the ack wait",
        after.moving_in
    );
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
    let started = std::time::Instant::now();
    let after = crash_mid_burst(&setup, BURST, Consumer::Short(&["--only-amended"])).await;
    delete_dead_letters(&setup).await;
    assert_in_order(
        &after.applied,
        ORDERS,
        &(2..=EVENTS as i64).collect::<Vec<_>>(),
    );
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
    let stream = setup.jetstream_stream().await;
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

/// The restart guard finds every message a crashed process held, however
/// far past the ack floor: one slow message (its handler blocked, kept
/// alive by progress acks) holds the floor while more than 20,000 stream
/// sequences of other subjects of the same stream pass (the guard read at
/// most 20,000 past the floor before), then 99 aggregates' first events
/// are delivered and held, filling the window, with their second events in
/// the stream behind them. The process is killed; the next one applies
/// every aggregate's events in order (before: the second events of those
/// past the cut were applied at once, their first ones came back after the
/// ack wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_restart_guard_finds_held_messages_past_twenty_thousand_stream_sequences() {
    use sea_orm::{ConnectionTrait, TransactionTrait};

    const WINDOW: usize = 100;
    const OTHERS: usize = 20_001;
    let setup = shared_setup(Backend::Postgres).await;
    let Setup {
        test,
        stream,
        outbox,
        table,
    } = &setup;
    txoutbox_suite::effects::create_table(test).await;
    let filter = format!("{}.test.>", stream.prefix);
    let window = WINDOW.to_string();
    // Ack wait 10 s: what is not handed back comes back only then.
    let args = [
        "--filter-subject",
        filter.as_str(),
        "--max-ack-pending",
        window.as_str(),
        "--ack-wait-ms",
        "10000",
    ];
    let processor = spawn_processor(outbox, stream.jetstream.client(), "/guard-cut");
    let consumer_info = || async {
        let info = setup
            .jetstream_stream()
            .await
            .consumer_info("effects")
            .await
            .expect("the consumer");
        (info.num_ack_pending, info.num_pending)
    };

    // Every handler blocks on the effects table until the test lets go.
    let lock = test.db.begin().await.expect("a transaction");
    lock.execute_unprepared("LOCK TABLE effects IN EXCLUSIVE MODE")
        .await
        .expect("lock the effects");
    let mut first = ordered_consumer(&setup, &args).await;
    let mut written = write_orders(outbox, "slow", 1, 1, 1).await as i64;
    wait_all_published(test, table, written).await;
    wait_until(
        Duration::from_secs(10),
        "the slow message is held",
        || async { consumer_info().await.0 == 1 },
    )
    .await;

    // Other subjects of the same stream pass the slow message by more than
    // 20,000 sequences.
    let started = std::time::Instant::now();
    let mut acks = Vec::with_capacity(1_000);
    for n in 0..OTHERS {
        let ack = stream
            .jetstream
            .publish(format!("{}.other", stream.prefix), n.to_string().into())
            .await
            .expect("publish");
        acks.push(ack);
        if acks.len() == 1_000 {
            for ack in acks.drain(..) {
                ack.await.expect("stored");
            }
        }
    }
    for ack in acks {
        ack.await.expect("stored");
    }
    println!(
        "{OTHERS} messages of another subject published in {:.2} s",
        started.elapsed().as_secs_f64()
    );

    // 99 aggregates' first events fill the window; their second events
    // wait in the stream.
    written += write_orders(outbox, "x", WINDOW - 1, 1, 50).await as i64;
    wait_all_published(test, table, written).await;
    for n in 0..WINDOW - 1 {
        amend_order(outbox, &format!("x-{n}"), 1).await;
    }
    written += (WINDOW - 1) as i64;
    wait_all_published(test, table, written).await;
    processor.shutdown().await.expect("clean shutdown");
    wait_until(
        Duration::from_secs(10),
        "the window is full and the second events wait in the stream",
        || async { consumer_info().await == (WINDOW, (WINDOW - 1) as u64) },
    )
    .await;

    first.kill();
    lock.rollback().await.expect("let go of the effects");
    let restarted = std::time::Instant::now();
    let second = ordered_consumer(&setup, &args).await;
    wait_until(
        Duration::from_secs(30),
        "every event is applied",
        || async { test.count("effects", "1=1").await >= written },
    )
    .await;
    println!(
        "every event applied {:.2} s after the restart",
        restarted.elapsed().as_secs_f64()
    );
    second.stop();
    delete_dead_letters(&setup).await;
    let applied = txoutbox_suite::effects::applied(test).await;
    assert_eq!(applied.get("slow-0"), Some(&vec![1]));
    let out_of_order: Vec<(&String, &Vec<i64>)> = applied
        .iter()
        .filter(|(aggregate, sequences)| {
            aggregate.starts_with("x-") && sequences.as_slice() != [1, 2]
        })
        .collect();
    assert!(
        out_of_order.is_empty(),
        "{} of {} aggregates applied out of order or not once, e.g. {:?}",
        out_of_order.len(),
        WINDOW - 1,
        out_of_order.first()
    );
    assert_eq!(applied.len(), WINDOW);
    assert!(
        restarted.elapsed() < Duration::from_secs(9),
        "the held messages came back only after their ack wait"
    );
}
