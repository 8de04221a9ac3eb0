//! Cleanup by default, on PostgreSQL, MariaDB and SQLite: the processor
//! deletes published outbox rows past their age and the subscriber its
//! inbox rows, in bounded batches, while events keep being written,
//! published and applied; nothing unpublished or unapplied is touched.

mod processor_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use processor_support::{save_new_order, shared_setup, spawn_tuned, wait_until};
use txoutbox_core::cleanup::{Cleanup, DEFAULT_KEEP_FOR};
use txoutbox_core::{Delivery, HandlerError};
use txoutbox_nats::subscriber::DeadLetterPolicy;
use txoutbox_nats::{JetStreamPublisher, Subscriber};
use txoutbox_sea_orm::{Inbox, UnitOfWork};
use txoutbox_suite::Backend;
use txoutbox_suite::orders::OrderPlaced;

/// Rows older than a second go, looked for every 200 ms.
fn quick() -> Cleanup {
    Cleanup::keep_for(Duration::from_secs(1))
        .check_every(Duration::from_millis(200))
        .batch_size(7)
}

async fn both_tables_are_cleaned_while_traffic_flows(backend: Backend) {
    let setup = shared_setup(backend).await;
    // The defaults: on, 7 days, for both.
    let client = setup.stream.jetstream.client();
    let default_processor = setup
        .outbox
        .processor(JetStreamPublisher::new(client.clone(), "/cleanup"));
    assert_eq!(
        default_processor.cleanup_schedule(),
        Some(Cleanup::default())
    );
    assert_eq!(Cleanup::default().older_than(), DEFAULT_KEEP_FOR);
    drop(default_processor);
    let durable = format!("{}_cleanup", setup.stream.name);
    assert_eq!(
        Subscriber::builder(client.clone(), &durable).cleanup_schedule(),
        Some(Cleanup::default())
    );

    let processor = spawn_tuned(&setup.outbox, client.clone(), "/cleanup", |builder| {
        builder.cleanup(quick())
    });
    let inbox = Inbox::new(&setup.outbox, &durable).expect("inbox");
    let applied = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&applied);
    let subscriber = Subscriber::builder(client.clone(), &durable)
        .stream(&setup.stream.name)
        .dead_letter(DeadLetterPolicy::terminate())
        .cleanup(quick())
        .on(
            inbox.handler_boxed(move |_: OrderPlaced, _: Delivery, _: &mut UnitOfWork| {
                let counter = Arc::clone(&counter);
                Box::pin(async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), HandlerError>(())
                })
            }),
        )
        .build()
        .await
        .expect("subscriber")
        .spawn();

    // 4 s of writes, about 100 a second.
    let table = setup.table.clone();
    let inbox_table = setup.outbox.config().inbox_table().as_str().to_owned();
    let mut written = 0_u64;
    for round in 0..40 {
        for k in 0..10 {
            save_new_order(&setup.outbox, &format!("o-{round}-{k}"), 100).await;
            written += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // At the end of 4 s of traffic, rows older than about 1.5 s are gone:
    // the tables hold well under half of what was written.
    let published = setup.test.count(&table, "status = 1").await as u64;
    let recorded = setup
        .test
        .count(&inbox_table, &format!("consumer = '{durable}'"))
        .await as u64;
    wait_until(Duration::from_secs(20), "every event applied", || async {
        applied.load(Ordering::SeqCst) >= written
    })
    .await;
    assert_eq!(setup.stream.count().await, written, "every event published");
    assert!(
        published <= written / 2 && recorded <= written / 2,
        "rows deleted while traffic flowed: {published} published and {recorded} inbox rows \
         left of {written}"
    );
    // Once traffic stops, both tables empty within a few passes.
    wait_until(Duration::from_secs(10), "both tables cleaned", || async {
        setup.test.count(&table, "1 = 1").await == 0
            && setup
                .test
                .count(&inbox_table, &format!("consumer = '{durable}'"))
                .await
                == 0
    })
    .await;
    subscriber.shutdown().await.expect("subscriber shutdown");
    processor.shutdown().await.expect("processor shutdown");
    assert_eq!(applied.load(Ordering::SeqCst), written, "each applied once");
}

txoutbox_suite::backend_tests!(both_tables_are_cleaned_while_traffic_flows:
    both_tables_are_cleaned_while_traffic_flows_on_postgres => Postgres,
    both_tables_are_cleaned_while_traffic_flows_on_mariadb => MySql,
    both_tables_are_cleaned_while_traffic_flows_on_sqlite => Sqlite,
);
