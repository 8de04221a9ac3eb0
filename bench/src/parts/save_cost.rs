//! The cost of saving an aggregate through the outbox compared to saving the
//! aggregate alone in a plain SeaORM transaction (`BEGIN`, `INSERT`,
//! `COMMIT`), on PostgreSQL: median and p99 of sequential saves. (The unit of
//! work sends one aggregate and its events as one statement, so it can be the
//! cheaper of the two.)

use crate::harness::error::BoxError;
use std::time::{Duration, Instant};

use sea_orm::{ActiveModelTrait, Set, TransactionTrait};
use txoutbox_core::AggregateRoot;
use txoutbox_fixtures::orders::{Order, entity};
use txoutbox_fixtures::{Backend, TestDb};
use txoutbox_sea_orm::{Outbox, OutboxConfig};

use crate::harness::stats::{ms, percentile};

const SAVES: usize = 2000;
const WARMUP: usize = 200;

pub(crate) async fn run() -> Result<(), BoxError> {
    let test = TestDb::with_schema(Backend::Postgres).await;
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default().without_notify());
    println!(
        "== save cost on PostgreSQL: {SAVES} sequential one-aggregate transactions per case =="
    );

    let mut baseline = Vec::with_capacity(SAVES);
    for i in 0..WARMUP + SAVES {
        let row = entity::ActiveModel {
            id: Set(format!("plain-{i}")),
            status: Set("placed".into()),
            total_cents: Set(100),
            version: Set(1),
        };
        let start = Instant::now();
        let txn = test.db.begin().await?;
        row.insert(&txn).await?;
        txn.commit().await?;
        if i >= WARMUP {
            baseline.push(start.elapsed());
        }
    }

    let mut cases = Vec::new();
    for events in [0usize, 1, 10] {
        let mut samples = Vec::with_capacity(SAVES);
        for i in 0..WARMUP + SAVES {
            let mut order = Order::place(format!("e{events}-{i}"), 100)?;
            for k in 1..events {
                order.amend(100 + k as i64)?;
            }
            if events == 0 {
                order.events_mut().mark_saved(0); // the state alone
            }
            let start = Instant::now();
            let mut uow = outbox.begin();
            uow.save(&mut order).await?;
            uow.commit().await?;
            if i >= WARMUP {
                samples.push(start.elapsed());
            }
        }
        cases.push((events, samples));
    }

    let base_p50 = percentile(&mut baseline, 0.5);
    println!(
        "aggregate alone, plain transaction    p50 {}  p99 {}",
        ms(base_p50),
        ms(percentile(&mut baseline, 0.99))
    );
    for (events, mut samples) in cases {
        let p50 = percentile(&mut samples, 0.5);
        println!(
            "unit of work, aggregate + {events:>2} event(s) p50 {}  p99 {}  (x{:.2} the plain transaction)",
            ms(p50),
            ms(percentile(&mut samples, 0.99)),
            p50.as_secs_f64() / base_p50.as_secs_f64().max(f64::EPSILON),
        );
    }
    drop(test);
    tokio::time::sleep(Duration::from_millis(10)).await;
    Ok(())
}
