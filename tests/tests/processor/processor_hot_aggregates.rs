//! Hot aggregates: 20 aggregates receive 500 events each while three
//! processors (own pools, own NATS connections, as separate processes)
//! drain them. One aggregate gets a poison message in the middle of a run
//! (over the server's `max_payload`): it is retried, goes dead, and holds
//! back only the rest of its aggregate. Every other event reaches the stream
//! exactly once, each aggregate's in sequence order, although the three
//! processors chain runs (`Nats-Expected-Last-Msg-Id`) and constantly
//! interleave on one stream.

mod processor_support;

use std::time::{Duration, Instant};

use processor_support::{
    AttachmentAdded, amend_order, assert_once_in_order, begin_with_order, poison_server,
    private_setup, quick_retry, read_all, row_ids, shut_down_all, spawn_separate_processors,
    spawn_writers, wait_until, write_orders,
};
use txoutbox_core::AggregateRoot;
use txoutbox_sea_orm::Outbox;
use txoutbox_suite::Backend;

const PROCESSORS: usize = 3;
const AGGREGATES: usize = 20;
const WRITERS: usize = 2;
/// Events per unit of work, and units per aggregate: 50 x 10 = 500 events.
const PER_UNIT: usize = 10;
const UNITS: usize = 50;
/// The aggregate, and the unit of work, that carry the poison.
const POISONED: usize = 7;
const POISON_UNIT: usize = 20;
const MAX_ATTEMPTS: u32 = 3;

fn order_id(n: usize) -> String {
    format!("hot-{n}")
}

/// One unit of work on `id` with `PER_UNIT` events, the poison in the
/// middle of them.
async fn amend_with_poison(outbox: &Outbox, id: &str) {
    let (mut uow, mut order) = begin_with_order(outbox, id).await;
    for k in 0..PER_UNIT - 1 {
        if k == PER_UNIT / 2 {
            order.record(AttachmentAdded::poison()).expect("record");
        }
        order.amend(2_000 + k as i64).expect("record");
    }
    uow.save(&mut order).await.expect("save");
    uow.commit().await.expect("commit");
}

async fn hot_aggregates_keep_their_order(backend: Backend) {
    let server = poison_server().await;
    let (test, stream, outbox, table) = private_setup(&server, backend, "hot").await.into_parts();
    // The first unit of each aggregate, before any processor runs.
    write_orders(&outbox, "hot", AGGREGATES, PER_UNIT, AGGREGATES).await;

    let processors = spawn_separate_processors(
        &test,
        outbox.config(),
        PROCESSORS,
        async || {
            server
                .connect()
                .await
                .expect("a client of the private nats-server")
        },
        "/hot-test",
        |builder| {
            builder
                .batch_size(200)
                .retry(quick_retry(MAX_ATTEMPTS))
                .poll_interval(Duration::from_millis(200))
        },
    )
    .await;

    // Writers go on while the processors drain: each owns half the
    // aggregates and gives each of them a unit of work per round.
    let started = Instant::now();
    let writers = spawn_writers(&outbox, WRITERS, |w, outbox| async move {
        for unit in 1..UNITS {
            for n in (w..AGGREGATES).step_by(WRITERS) {
                if n == POISONED && unit == POISON_UNIT {
                    amend_with_poison(&outbox, &order_id(n)).await;
                } else {
                    amend_order(&outbox, &order_id(n), PER_UNIT).await;
                }
            }
        }
    });
    for writer in writers {
        writer.await.expect("writer");
    }
    let total = AGGREGATES * UNITS * PER_UNIT;
    let written = test.count(&table, "1=1").await as usize;
    assert_eq!(written, total);

    // Behind the poison: the rest of its unit and the later units.
    let poison_sequence = (POISON_UNIT * PER_UNIT + PER_UNIT / 2 + 1) as i64;
    let behind = test
        .count(
            &table,
            &format!(
                "aggregate_id = '{}' AND sequence > {poison_sequence}",
                order_id(POISONED)
            ),
        )
        .await as usize;
    assert_eq!(
        behind,
        (UNITS - POISON_UNIT) * PER_UNIT - (PER_UNIT / 2 + 1)
    );
    wait_until(
        Duration::from_secs(120),
        "everything but the poisoned aggregate's tail is published, the poison dead",
        || async {
            test.count(&table, "status = 1").await as usize == total - 1 - behind
                && test.count(&table, "status = 2").await == 1
        },
    )
    .await;
    let drained_after = started.elapsed();

    let reports = shut_down_all(processors).await;
    println!(
        "{backend:?}: {total} events over {AGGREGATES} aggregates drained {drained_after:?} after \
         the writers started; published per processor {:?}",
        reports.iter().map(|r| r.published).collect::<Vec<_>>()
    );

    // The stream: every published row once, every aggregate in order.
    let stored = read_all(&stream).await;
    let published = row_ids(&test, &table, "status = 1").await;
    assert_once_in_order(&stored, &published);

    // The poison: dead with its reason after its attempts; its tail waits.
    let dead = test
        .count(
            &table,
            &format!(
                "status = 2 AND sequence = {poison_sequence} AND attempts = {MAX_ATTEMPTS} \
                 AND last_error LIKE '%max_payload%'"
            ),
        )
        .await;
    assert_eq!(dead, 1, "the poison is dead with its reason");
    let waiting = test
        .count(
            &table,
            &format!(
                "status = 0 AND attempts = 0 AND aggregate_id = '{}' AND sequence > {poison_sequence}",
                order_id(POISONED)
            ),
        )
        .await as usize;
    assert_eq!(
        waiting, behind,
        "the poisoned aggregate's tail waits, untried"
    );
    assert_eq!(
        test.count(&table, "lease_token IS NOT NULL AND status = 0")
            .await,
        0
    );
    stream.delete().await;
}

txoutbox_suite::backend_tests!(hot_aggregates_keep_their_order:
    hot_aggregates_keep_their_order_on_postgres => Postgres,
    hot_aggregates_keep_their_order_on_mariadb => MySql,
);
