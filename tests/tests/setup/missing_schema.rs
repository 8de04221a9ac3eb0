//! A missing schema fails fast, naming what to run: a processor on a
//! database without the outbox table stops within a second with
//! `ProcessorError::MissingSchema` (in its health, in `shutdown()`'s
//! result); on a table of an older schema (the first migration only) the
//! error names the migrations that have not run; `Inbox::check_table`
//! names the inbox's; `Processor::check_schema` and the axum `Runtime`'s
//! `start` fail with it before anything runs. On PostgreSQL, MariaDB and
//! SQLite.

use std::time::{Duration, Instant};

use sea_orm_migration::{MigrationTrait, SchemaManager};
use txoutbox_core::processor::{HealthThresholds, ProcessorError};
use txoutbox_core::store::MissingSchema;
use txoutbox_sea_orm::migration::CreateOutboxTable;
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, OutboxError};
use txoutbox_suite::{Backend, TestDb};
use txoutbox_testing::MemoryPublisher;

/// Spawns a processor on `outbox` and returns the error it stopped with,
/// asserting it stopped within a second and said so in its health.
async fn processor_stops(outbox: &Outbox) -> MissingSchema {
    let started = Instant::now();
    let processor = outbox
        .processor(MemoryPublisher::new())
        .build()
        .expect("settings")
        .spawn();
    while !processor.is_finished() {
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the processor still runs after a second"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let health = processor.health().check(&HealthThresholds::default());
    assert!(!health.healthy && !health.running, "{health:?}");
    assert!(
        health.problems[0].contains("could not start") && health.problems[0].contains("migrate"),
        "{health:?}"
    );
    match processor.shutdown().await {
        Err(ProcessorError::MissingSchema(missing)) => missing,
        other => panic!("expected MissingSchema, got {other:?}"),
    }
}

async fn a_processor_without_its_table_fails_at_once(backend: Backend) {
    let test = TestDb::new(backend).await;
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default());
    let missing = processor_stops(&outbox).await;
    let MissingSchema::Table { table, remedy } = &missing else {
        panic!("{missing:?}");
    };
    assert_eq!(table, "outbox_messages");
    for what in ["outbox migrate", "OutboxMigrator::up", "create_schema"] {
        assert!(remedy.contains(what), "{what} in {missing}");
    }
    assert!(!outbox.processor_takes_commits());

    // Checked before it runs: by the processor itself, and by a runtime's start.
    let processor = outbox
        .processor(MemoryPublisher::new())
        .build()
        .expect("settings");
    match processor.check().await {
        Err(ProcessorError::MissingSchema(checked)) => assert_eq!(checked, missing),
        other => panic!("expected MissingSchema, got {other:?}"),
    }
    let started = txoutbox::axum::Runtime::builder()
        .processor(outbox.processor(MemoryPublisher::new()))
        .handle_signals(false)
        .start()
        .await;
    match started {
        Err(txoutbox::axum::RuntimeError::Processor(ProcessorError::MissingSchema(refused))) => {
            assert_eq!(refused, missing);
        }
        Err(other) => panic!("expected MissingSchema, got {other:?}"),
        Ok(_) => panic!("a runtime started without the outbox table"),
    }
}

async fn an_old_schema_names_the_migrations_to_run(backend: Backend) {
    let test = TestDb::new(backend).await;
    let config = OutboxConfig::default();
    // The first migration only: no `abandoned`, no `skipped_*` columns.
    CreateOutboxTable::new(&config)
        .up(&SchemaManager::new(&test.db))
        .await
        .expect("first migration");
    let outbox = Outbox::new(test.db.clone(), config);
    let missing = processor_stops(&outbox).await;
    let MissingSchema::Columns {
        table,
        columns,
        remedy,
    } = &missing
    else {
        panic!("{missing:?}");
    };
    assert_eq!(table, "outbox_messages");
    assert_eq!(
        columns,
        &["abandoned", "skipped_at", "skipped_by", "skip_reason"]
    );
    for what in [
        "m20261124_000004_abandoned_outbox_messages",
        "m20261125_000006_skipped_outbox_messages",
        "outbox migrate",
    ] {
        assert!(remedy.contains(what), "{what} in {missing}");
    }
}

async fn the_inbox_checks_its_table(backend: Backend) {
    let test = TestDb::new(backend).await;
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default());
    let inbox = Inbox::new(&outbox, "billing").expect("inbox");
    match inbox.check_table().await {
        Err(OutboxError::MissingSchema(MissingSchema::Table { table, remedy })) => {
            assert_eq!(table, "outbox_inbox");
            assert!(
                remedy.contains("m20261123_000002_create_outbox_inbox")
                    && remedy.contains("outbox migrate"),
                "{remedy}"
            );
        }
        other => panic!("expected the inbox table missing, got {other:?}"),
    }
    txoutbox_sea_orm::create_schema(&test.db, outbox.config())
        .await
        .expect("schema");
    inbox.check_table().await.expect("the inbox table is there");
    // And a processor on the full schema runs.
    let processor = outbox
        .processor(MemoryPublisher::new())
        .build()
        .expect("settings")
        .spawn();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!processor.is_finished());
    processor.shutdown().await.expect("a clean stop");
}

txoutbox_suite::each_backend!(empty:
    a_processor_without_its_table_fails_at_once,
    an_old_schema_names_the_migrations_to_run,
    the_inbox_checks_its_table,
);
