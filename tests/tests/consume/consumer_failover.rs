//! Failover (`SubscriberBuilder::failover`, nats-server 2.11+): several
//! processes run one ordered subscriber on one durable; the server pins one,
//! which alone receives; when it dies another takes over.
//!
//! On a private nats-server 2.14 (`current_nats_server`, installed by
//! `scripts/ensure-services.sh`): three consumer processes, a burst over
//! many aggregates, the pinned process SIGKILLed mid-burst twice. Every
//! effect is applied once and each aggregate's in order; between kills one
//! process alone applies; effects flow again well before the ack wait.
//! Prints, for each kill, when the server pinned another process and when
//! that one's effects began. Also: a pinned process stopped in order
//! hands over at once; one frozen past the pin timeout is replaced and
//! wakes harmlessly; the mode refused on a server without priority groups
//! (the machine's 2.9.10); a durable created without it refused rather than
//! changed.

#[path = "../processor/processor_support/mod.rs"]
mod processor_support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::PriorityPolicy;
use processor_support::{Setup, private_setup, spawn_processor, wait_all_published, write_orders};
use txoutbox_core::{Delivery, HandlerError};
use txoutbox_nats::subscriber::{
    DeadLetterPolicy, SubscriberBuildError, SubscriberSettings, dead_lettering,
};
use txoutbox_nats::{StreamSpec, Subscriber};
use txoutbox_suite::Backend;
use txoutbox_suite::jetstream::{TestStream, nats_url};
use txoutbox_suite::nats::{NatsServer, current_nats_server};
use txoutbox_suite::orders::OrderPlaced;
use txoutbox_suite::process::ProcessorProcess;

const ORDERS: usize = 600;
const EVENTS: usize = 10;
/// The consumers' ack wait: what a takeover must beat by far.
const ACK_WAIT: Duration = Duration::from_secs(15);
const DURABLE: &str = "effects";

/// A private nats-server 2.14.
async fn current_server() -> NatsServer {
    NatsServer::builder()
        .binary(current_nats_server().display().to_string())
        .start()
        .await
        .expect("a private nats-server 2.14")
}

/// Starts an `outbox-test-consumer` in failover mode on `server`, recording
/// `label` with its effects.
async fn replica(setup: &Setup, server: &NatsServer, label: &str) -> ProcessorProcess {
    let ack_wait = ACK_WAIT.as_millis().to_string();
    let args = [
        "--stream",
        &setup.stream.name,
        "--durable",
        DURABLE,
        "--ack-wait-ms",
        &ack_wait,
        "--failover",
        "--label",
        label,
    ];
    ProcessorProcess::try_start_on(
        env!("CARGO_BIN_EXE_outbox-test-consumer"),
        &setup.test,
        &server.url(),
        &setup.stream.prefix,
        &args,
    )
    .await
    .unwrap_or_else(|output| panic!("replica {label} did not start: {output}"))
}

/// The highest effect id so far (0 without effects).
async fn last_effect(setup: &Setup) -> i64 {
    let rows = setup
        .test
        .rows("SELECT COALESCE(MAX(id), 0) AS last FROM effects")
        .await;
    rows[0].try_get("", "last").expect("last id")
}

/// The processes that applied the effects after id `after`, but `except`.
async fn appliers(setup: &Setup, after: i64, except: &str) -> Vec<String> {
    setup
        .test
        .rows(&format!(
            "SELECT DISTINCT process FROM effects WHERE id > {after} AND process <> '{except}' \
             ORDER BY process"
        ))
        .await
        .iter()
        .map(|row| row.try_get("", "process").expect("process"))
        .collect()
}

/// Starts replicas `a` and `b`, waits until `at_least` effects are
/// applied, and asserts one process applies them. Returns the replicas by
/// label, the last effect's id then, and the label of the one applying.
async fn two_replicas_applying(
    setup: &Setup,
    server: &NatsServer,
    at_least: i64,
) -> (HashMap<String, ProcessorProcess>, i64, String) {
    let mut replicas: HashMap<String, ProcessorProcess> = HashMap::new();
    for label in ["a", "b"] {
        replicas.insert(label.to_owned(), replica(setup, server, label).await);
    }
    wait_for_effects(
        setup,
        at_least,
        Duration::from_secs(30),
        "the burst is being applied",
    )
    .await;
    let before = last_effect(setup).await;
    let pinned = appliers(setup, 0, "").await;
    assert_eq!(pinned.len(), 1, "one process applies at a time: {pinned:?}");
    (replicas, before, pinned[0].clone())
}

/// The pin id of the durable's priority group, as the server reports it.
async fn pin_of(setup: &Setup) -> Option<String> {
    let stream = setup.jetstream_stream().await;
    let info = stream.consumer_info(DURABLE).await.expect("consumer info");
    info.priority_groups
        .first()
        .and_then(|group| group.pinned_client_id.clone())
}

/// After the pinned process `dead` was killed at `killed`, with effects up
/// to id `before` applied: polls every 20 ms until the server pins another
/// process and an effect of another process is applied. Returns the times
/// from the kill to each, and the new pinned process.
async fn takeover(
    setup: &Setup,
    dead: &str,
    old_pin: Option<String>,
    killed: Instant,
    before: i64,
) -> (Duration, Duration, String) {
    let (mut pinned, mut flowing) = (None, None);
    loop {
        if pinned.is_none() && pin_of(setup).await.is_some_and(|pin| Some(pin) != old_pin) {
            pinned = Some(killed.elapsed());
        }
        if flowing.is_none() {
            let others = appliers(setup, before, dead).await;
            if let Some(next) = others.first() {
                assert_eq!(others.len(), 1, "one process took over: {others:?}");
                flowing = Some((killed.elapsed(), next.clone()));
            }
        }
        if let (Some(pinned), Some((flowing, next))) = (pinned, flowing.clone()) {
            return (pinned, flowing, next);
        }
        assert!(
            killed.elapsed() < 2 * ACK_WAIT,
            "no takeover within {:?} of killing {dead} (pinned again: {pinned:?})",
            2 * ACK_WAIT
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `count` effects are applied (up to `timeout`).
async fn wait_for_effects(setup: &Setup, count: i64, timeout: Duration, what: &str) {
    processor_support::wait_until(timeout, what, || async {
        setup.test.count("effects", "1=1").await >= count
    })
    .await;
}

/// A private 2.14 server with a stream holding a burst of `orders` orders
/// of [`EVENTS`] events, and the `effects` table; the burst's size.
async fn burst(orders: usize) -> (NatsServer, Setup, i64) {
    let server = current_server().await;
    let setup = private_setup(&server, Backend::Postgres, "failover").await;
    txoutbox_suite::effects::create_table(&setup.test).await;
    let total = write_orders(&setup.outbox, "f", orders, EVENTS, 50).await as i64;
    let processor = spawn_processor(
        &setup.outbox,
        setup.stream.jetstream.client(),
        "/consumer-failover",
    );
    wait_all_published(&setup.test, &setup.table, total).await;
    processor.shutdown().await.expect("clean shutdown");
    (server, setup, total)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_on_one_durable_survive_two_kills_of_the_pinned_one() {
    let (server, setup, total) = burst(ORDERS).await;

    let started = Instant::now();
    let mut replicas: HashMap<String, ProcessorProcess> = HashMap::new();
    for label in ["a", "b", "c"] {
        replicas.insert(label.to_owned(), replica(&setup, &server, label).await);
    }
    wait_for_effects(
        &setup,
        total / 10,
        Duration::from_secs(30),
        "the burst is being applied",
    )
    .await;
    let mut phase_start = 0;
    let mut last_dead = String::new();
    for kill in 1..=2 {
        let before = last_effect(&setup).await;
        let pinned = appliers(&setup, phase_start, &last_dead).await;
        assert_eq!(pinned.len(), 1, "one process applies at a time: {pinned:?}");
        let dead = pinned[0].clone();
        let old_pin = pin_of(&setup).await;
        replicas.remove(&dead).expect("a live replica").kill();
        let killed = Instant::now();
        let done = setup.test.count("effects", "1=1").await;
        let (pinned_after, flowing_after, next) =
            takeover(&setup, &dead, old_pin, killed, before).await;
        println!(
            "kill {kill}: {dead} killed after {done} of {total} effects; the server pinned \
             another process after {:.2} s; {next}'s effects flowed {:.2} s after the kill",
            pinned_after.as_secs_f64(),
            flowing_after.as_secs_f64()
        );
        assert!(
            flowing_after < ACK_WAIT * 2 / 3,
            "effects flowed again {flowing_after:?} after the kill: not well before the ack \
             wait ({ACK_WAIT:?})"
        );
        (phase_start, last_dead) = (before, dead);
        if kill == 1 {
            // The new pinned process applies a share of the burst before it dies too.
            let now = setup.test.count("effects", "1=1").await;
            wait_for_effects(
                &setup,
                now + total / 10,
                Duration::from_secs(30),
                "the second pinned process applies",
            )
            .await;
            assert!(
                setup.test.count("effects", "1=1").await < total,
                "the burst ended before the second kill"
            );
        }
    }
    wait_for_effects(
        &setup,
        total,
        Duration::from_secs(60),
        "every event is applied",
    )
    .await;
    println!(
        "all {total} effects applied {:.1} s after the replicas started",
        started.elapsed().as_secs_f64()
    );
    let survivors = appliers(&setup, phase_start, &last_dead).await;
    assert_eq!(
        survivors.len(),
        1,
        "one process applies at a time: {survivors:?}"
    );
    txoutbox_suite::effects::assert_each_applied_once_in_order(&setup.test, &setup.table).await;
    for (_, replica) in replicas {
        replica.stop();
    }
}

/// A pinned process stopped in order (its standard input closed: a
/// rolling deploy) releases its pin: the standby's effects flow well
/// before the pin timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_replica_stopped_in_order_hands_over_at_once() {
    let (server, setup, total) = burst(ORDERS / 3).await;
    let (mut replicas, before, pinned) = two_replicas_applying(&setup, &server, total / 5).await;
    let old_pin = pin_of(&setup).await;
    let stopping = Instant::now();
    let report = replicas.remove(&pinned).expect("a live replica").stop();
    assert!(report.contains("stopped=1"), "{report}");
    let stopped_in = stopping.elapsed();
    let (pinned_after, flowing_after, next) =
        takeover(&setup, &pinned, old_pin, stopping, before).await;
    println!(
        "{} stopped in order in {:.2} s; the server pinned {next} {:.2} s after the stop \
         began; its effects flowed after {:.2} s",
        pinned,
        stopped_in.as_secs_f64(),
        pinned_after.as_secs_f64(),
        flowing_after.as_secs_f64()
    );
    assert!(
        flowing_after < Duration::from_secs(3),
        "effects flowed again {flowing_after:?} after an orderly stop: the pin was not released \
         (the pin timeout is 4 s)"
    );
    wait_for_effects(
        &setup,
        total,
        Duration::from_secs(60),
        "every event is applied",
    )
    .await;
    txoutbox_suite::effects::assert_each_applied_once_in_order(&setup.test, &setup.table).await;
    for (_, replica) in replicas {
        replica.stop();
    }
}

/// A pinned process frozen (SIGSTOP: a VM pause, a long GC) past the pin
/// timeout loses its pin; another takes over with what the frozen one held;
/// woken (SIGCONT), the frozen one finds its messages applied (the inbox
/// makes its copies duplicates) and every effect is still applied once and
/// in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_pinned_replica_is_replaced_and_wakes_harmlessly() {
    let (server, setup, total) = burst(ORDERS / 2).await;
    let (mut replicas, before, pinned) = two_replicas_applying(&setup, &server, total / 10).await;
    let frozen = pinned;
    let old_pin = pin_of(&setup).await;
    replicas.get_mut(&frozen).expect("a live replica").pause();
    let paused = Instant::now();
    let (pinned_after, flowing_after, next) =
        takeover(&setup, &frozen, old_pin, paused, before).await;
    println!(
        "{frozen} frozen; the server pinned {next} after {:.2} s; its effects flowed after {:.2} s",
        pinned_after.as_secs_f64(),
        flowing_after.as_secs_f64()
    );
    let now = setup.test.count("effects", "1=1").await;
    wait_for_effects(
        &setup,
        now + total / 10,
        Duration::from_secs(30),
        "the new pinned process applies",
    )
    .await;
    replicas
        .get_mut(&frozen)
        .expect("the frozen replica")
        .resume();
    wait_for_effects(
        &setup,
        total,
        Duration::from_secs(60),
        "every event is applied",
    )
    .await;
    // What the woken one still held settles as duplicates meanwhile.
    tokio::time::sleep(Duration::from_secs(1)).await;
    txoutbox_suite::effects::assert_each_applied_once_in_order(&setup.test, &setup.table).await;
    for (_, replica) in replicas {
        replica.stop();
    }
}

/// A subscriber on `stream` without an inbox (`unordered`), in failover mode
/// when `failover`; what `build` answers.
async fn build(stream: &TestStream, failover: bool) -> Result<Subscriber, SubscriberBuildError> {
    let mut builder = Subscriber::builder(stream.jetstream.clone(), DURABLE)
        .stream(&stream.name)
        .dead_letter(DeadLetterPolicy::terminate())
        .on(|_: OrderPlaced, _: Delivery| async { Ok::<_, HandlerError>(()) })
        .unordered();
    if failover {
        builder = builder.failover();
    }
    builder.build().await
}

/// The shared server is Debian's 2.9.10, which has no priority groups: the
/// mode is refused at build, naming the version and partitions. (Should the
/// shared server be 2.11 or later, the mode must build instead.)
#[tokio::test]
async fn failover_is_refused_by_a_server_without_priority_groups() {
    let client = async_nats::connect(nats_url()).await.expect("nats");
    let version = client.server_info().version;
    let stream = TestStream::new(client).await;
    let supported = version
        .split('.')
        .take(2)
        .map(|part| part.parse::<u64>().unwrap_or(0))
        .collect::<Vec<_>>()
        >= vec![2, 11];
    match build(&stream, true).await {
        Err(SubscriberBuildError::FailoverUnsupported {
            server_version,
            consumer,
        }) if !supported => {
            assert_eq!(server_version, version);
            assert_eq!(consumer, DURABLE);
            let message = SubscriberBuildError::FailoverUnsupported {
                server_version,
                consumer,
            }
            .to_string();
            println!("{message}");
            assert!(
                message.contains("2.11") && message.contains(&version),
                "{message}"
            );
            assert!(message.contains("partitions("), "{message}");
        }
        Ok(_) if supported => println!("server {version} has priority groups: failover builds"),
        other => panic!("server {version}: unexpected {other:?}"),
    }
    let _ = stream.jetstream.delete_stream(&stream.name).await;
}

/// Two failover subscribers in this process: the health probe tells the
/// pinned one from the standby, and a dead letter is a copy of the message
/// as stored, without the pin id the server stamped on the delivery.
#[tokio::test]
async fn the_probe_tells_the_pinned_one_and_dead_letters_carry_no_pin_id() {
    let server = current_server().await;
    let stream = TestStream::new(server.connect().await.expect("a client")).await;
    let subscriber = || async {
        Subscriber::builder(stream.jetstream.clone(), DURABLE)
            .stream(&stream.name)
            .dead_letter_stream(StreamSpec::dead_letters())
            .on(|_: OrderPlaced, _: Delivery| async { Ok::<_, HandlerError>(()) })
            .unordered()
            .failover()
            .build()
            .await
            .expect("a failover subscriber")
            .spawn()
    };
    let (one, other) = (subscriber().await, subscriber().await);
    // Not an envelope: dead-lettered as `invalid-envelope`.
    stream
        .jetstream
        .publish(format!("{}.order.placed", stream.prefix), "x".into())
        .await
        .expect("sent")
        .await
        .expect("stored");
    let dead_letters = stream
        .jetstream
        .get_stream("DLQ")
        .await
        .expect("the dead-letter stream");
    let subject = format!("dlq.{DURABLE}");
    let subject = subject.as_str();
    processor_support::wait_until(Duration::from_secs(10), "a dead letter", || async {
        dead_letters
            .get_last_raw_message_by_subject(subject)
            .await
            .is_ok()
    })
    .await;
    let copy = dead_letters
        .get_last_raw_message_by_subject(subject)
        .await
        .ok();
    let timeout = Duration::from_secs(2);
    let mut pinned = vec![
        one.health().check(timeout).await.pinned,
        other.health().check(timeout).await.pinned,
    ];
    pinned.sort();
    assert_eq!(pinned, [Some(false), Some(true)], "one pinned, one standby");
    one.shutdown().await.expect("clean shutdown");
    other.shutdown().await.expect("clean shutdown");
    let headers = copy.expect("the dead letter").headers;
    assert_eq!(
        headers.get(dead_lettering::KIND).map(|kind| kind.as_str()),
        Some("invalid-envelope")
    );
    assert!(
        headers.get(async_nats::header::NATS_PIN_ID).is_none(),
        "the pin id was copied: {headers:?}"
    );
}

/// Failover from a configuration file: `failover_after` sets the pin
/// timeout of the durable it creates.
#[tokio::test]
async fn failover_from_settings() {
    let server = current_server().await;
    let stream = TestStream::new(server.connect().await.expect("a client")).await;
    let settings: SubscriberSettings =
        serde_json::from_str(r#"{ "failover_after": "6s", "unordered": true }"#).expect("settings");
    Subscriber::builder(stream.jetstream.clone(), DURABLE)
        .stream(&stream.name)
        .settings(&settings)
        .dead_letter(DeadLetterPolicy::terminate())
        .on(|_: OrderPlaced, _: Delivery| async { Ok::<_, HandlerError>(()) })
        .build()
        .await
        .expect("a failover subscriber");
    let config = stream
        .jetstream
        .get_stream(&stream.name)
        .await
        .expect("the stream")
        .consumer_info(DURABLE)
        .await
        .expect("consumer info")
        .config
        .clone();
    assert_eq!(config.priority_policy, PriorityPolicy::PinnedClient);
    assert_eq!(config.priority_timeout, Duration::from_secs(6));
}

/// Settings failover cannot work with are refused before the server is
/// asked anything: a pin timeout under 1 s, and partitions.
#[tokio::test]
async fn failover_settings_that_cannot_work_are_refused() {
    let client = async_nats::connect(nats_url()).await.expect("nats");
    let builder = || {
        Subscriber::builder(client.clone(), DURABLE)
            .stream("NONE")
            .dead_letter(DeadLetterPolicy::terminate())
            .on(|_: OrderPlaced, _: Delivery| async { Ok::<_, HandlerError>(()) })
            .unordered()
    };
    let refused = |result: Result<Subscriber, SubscriberBuildError>, words: &str| match result {
        Err(SubscriberBuildError::InvalidConfig(what)) => assert!(what.contains(words), "{what}"),
        other => panic!("expected InvalidConfig ({words}), got {other:?}"),
    };
    refused(
        builder()
            .failover_after(Duration::from_millis(500))
            .build()
            .await,
        "at least 1s",
    );
    let partitions = txoutbox_core::Partitions::new(2).expect("2 partitions");
    refused(
        builder()
            .failover()
            .partitions("events", partitions, [0])
            .build()
            .await,
        "exclude each other",
    );
}

/// A durable created without failover is refused, not changed, by a
/// failover subscriber; the one created with it has the pinned-client group.
#[tokio::test]
async fn a_durable_created_without_failover_is_refused_not_changed() {
    let server = current_server().await;
    let stream = TestStream::new(server.connect().await.expect("a client")).await;
    build(&stream, false).await.expect("a plain durable");
    match build(&stream, true).await {
        Err(SubscriberBuildError::ConsumerMismatch {
            setting,
            existing,
            wanted,
            ..
        }) => {
            assert_eq!(setting, "priority_policy");
            assert!(existing.starts_with("none"), "{existing}");
            assert!(wanted.contains("failover"), "{wanted}");
        }
        other => panic!("expected a priority_policy mismatch, got {other:?}"),
    }
    let handle = stream
        .jetstream
        .get_stream(&stream.name)
        .await
        .expect("the stream");
    let info = handle.consumer_info(DURABLE).await.expect("consumer info");
    assert_eq!(
        info.config.priority_policy,
        PriorityPolicy::None,
        "unchanged"
    );

    handle.delete_consumer(DURABLE).await.expect("deleted");
    build(&stream, true).await.expect("a failover durable");
    let config = handle
        .consumer_info(DURABLE)
        .await
        .expect("consumer info")
        .config
        .clone();
    assert_eq!(config.priority_policy, PriorityPolicy::PinnedClient);
    assert_eq!(config.priority_groups, ["failover"]);
    assert_eq!(
        config.priority_timeout,
        Duration::from_secs(4),
        "the default"
    );
    match build(&stream, false).await {
        Err(SubscriberBuildError::ConsumerMismatch { setting, .. }) => {
            assert_eq!(setting, "priority_policy");
        }
        other => panic!("a plain subscriber on a failover durable: {other:?}"),
    }
}
