//! After an incident, one command releases every held aggregate of a
//! consumer: a subscriber (keeping order through its inbox, on PostgreSQL
//! and the machine's nats-server) holds 500 aggregates, each behind its
//! first message, which its handler rejects until the cause is fixed, with
//! two messages parked behind it; the cause fixed, `outbox release
//! --consumer C --all --yes` releases the 500, and the subscriber applies
//! every parked message exactly once and in order per aggregate (read back
//! from the handler's effects table).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use sea_orm::ConnectionTrait;
use sea_orm::sea_query::Query;
use support::{outbox, outbox_of};
use txoutbox_core::HandlerError;
use txoutbox_fixtures::orders::OrderAmended;
use txoutbox_fixtures::subscriber::{SubscriberFixture, eventually};
use txoutbox_fixtures::{Backend, TestDb};
use txoutbox_nats::subscriber::RunningSubscriber;
use txoutbox_sea_orm::Inbox;

/// Held aggregates.
const AGGREGATES: usize = 500;
/// Messages per aggregate: the first holds it, the others are parked.
const STEPS: i64 = 3;
const WAIT: Duration = Duration::from_secs(60);

async fn create_effects(test: &TestDb) {
    test.db
        .execute_unprepared(
            "CREATE TABLE effects (aggregate_id VARCHAR(64) NOT NULL, step BIGINT NOT NULL, \
             position BIGINT NOT NULL)",
        )
        .await
        .unwrap();
}

/// The handler: rejects every aggregate's first step until `fixed`, and
/// records each step it applies, with its position, in the inbox's
/// transaction.
async fn start(
    fixture: &SubscriberFixture,
    inbox: &Inbox,
    fixed: &Arc<AtomicBool>,
) -> RunningSubscriber {
    let (fixed, position) = (Arc::clone(fixed), Arc::new(AtomicI64::new(0)));
    let handler = inbox.handler_boxed(move |event: OrderAmended, _delivery, uow| {
        let (fixed, position) = (Arc::clone(&fixed), Arc::clone(&position));
        Box::pin(async move {
            if event.total_cents == 1 && !fixed.load(Ordering::SeqCst) {
                return Err(HandlerError::permanent("the payment service is down"));
            }
            let insert = Query::insert()
                .into_table("effects")
                .columns(["aggregate_id", "step", "position"])
                .values([
                    event.order_id.into(),
                    event.total_cents.into(),
                    position.fetch_add(1, Ordering::SeqCst).into(),
                ])?
                .to_owned();
            uow.connection().await?.execute(&insert).await?;
            Ok(())
        })
    });
    fixture
        .subscriber()
        .on(handler)
        .build()
        .await
        .unwrap()
        .spawn()
}

/// Each aggregate's applied steps, in the order applied.
async fn applied(test: &TestDb) -> std::collections::BTreeMap<String, Vec<i64>> {
    let mut applied = std::collections::BTreeMap::<String, Vec<i64>>::new();
    for row in test
        .rows("SELECT aggregate_id, step FROM effects ORDER BY position")
        .await
    {
        applied
            .entry(row.try_get("", "aggregate_id").unwrap())
            .or_default()
            .push(row.try_get("", "step").unwrap());
    }
    applied
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_command_releases_500_held_aggregates() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    create_effects(&test).await;
    let fixture = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox_of(&test), fixture.durable.clone()).unwrap();
    let fixed = Arc::new(AtomicBool::new(false));
    let running = start(&fixture, &inbox, &fixed).await;

    let began = Instant::now();
    for step in 1..=STEPS {
        for n in 0..AGGREGATES {
            let order_id = format!("o-{n}");
            let event = OrderAmended {
                order_id: order_id.clone(),
                total_cents: step,
            };
            let sequence = u64::try_from(step).unwrap();
            fixture
                .publish(&fixture.message(&event, &order_id, sequence))
                .await;
        }
    }
    eprintln!("published in {:?}", began.elapsed());
    let parked = i64::try_from(AGGREGATES).unwrap() * STEPS;
    eventually("every message parked", WAIT, || async {
        test.count("outbox_inbox_held", "1 = 1").await == parked
    })
    .await;
    let holds = inbox.holds().await.unwrap();
    assert_eq!(holds.len(), AGGREGATES);
    assert!(holds.iter().all(|h| h.waiting == 2 && h.release.is_none()));
    assert_eq!(test.count("effects", "1 = 1").await, 0);
    eprintln!("held {AGGREGATES} aggregates in {:?}", began.elapsed());

    // The cause fixed: one command releases them all.
    fixed.store(true, Ordering::SeqCst);
    let began = Instant::now();
    let run = outbox(
        &test,
        &["release", "--consumer", &fixture.durable, "--all", "--yes"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.out.contains(&format!(
            "released {AGGREGATES} held aggregate(s) of consumer {} (retry)",
            fixture.durable
        )),
        "{run:?}"
    );
    let total = i64::try_from(AGGREGATES).unwrap() * STEPS;
    eventually("every parked message applied", WAIT, || async {
        test.count("effects", "1 = 1").await >= total
    })
    .await;
    eprintln!("released and applied in {:?}", began.elapsed());

    // Each once, in order; nothing held or parked any more.
    let applied = applied(&test).await;
    assert_eq!(applied.len(), AGGREGATES);
    for (aggregate, steps) in &applied {
        assert_eq!(steps, &[1, 2, 3], "{aggregate}");
    }
    eventually("no hold left", WAIT, || async {
        inbox.holds().await.unwrap().is_empty()
    })
    .await;
    assert_eq!(test.count("outbox_inbox_held", "1 = 1").await, 0);
    assert_eq!(test.count("effects", "1 = 1").await, total);
    running.shutdown().await.unwrap();
    fixture.delete().await;
}
