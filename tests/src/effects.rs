//! What a consumer's handlers did, as rows: each applied event is a row of
//! `effects` (aggregate, sequence, and the process that applied it where a
//! test runs several) written in the inbox's transaction, so a
//! test can check that every committed event was applied once and in each
//! aggregate's order, whatever was killed on the way.

use std::collections::HashMap;

use sea_orm::ConnectionTrait;
use txoutbox_core::{Delivery, HandlerError};
use txoutbox_sea_orm::UnitOfWork;

use crate::TestDb;

/// Creates the `effects` table in `test`'s schema.
///
/// # Panics
/// When the database refuses the statement.
pub async fn create_table(test: &TestDb) {
    let id = id_column(test);
    test.db
        .execute_unprepared(&format!(
            "CREATE TABLE effects ({id}, aggregate_id varchar(255) NOT NULL, \
             sequence bigint NOT NULL, process varchar(64))"
        ))
        .await
        .expect("effects table");
}

/// Applies the delivered event: one row of `effects` with its aggregate
/// and sequence, in the handler's unit of work (so the row and the inbox's
/// record of the message commit together).
pub async fn apply(uow: &mut UnitOfWork, delivery: &Delivery) -> Result<(), HandlerError> {
    apply_as(uow, delivery, None).await
}

/// [`apply`], naming the `process` that applied it.
pub async fn apply_as(
    uow: &mut UnitOfWork,
    delivery: &Delivery,
    process: Option<&str>,
) -> Result<(), HandlerError> {
    let message = delivery.message();
    let process = process.map_or("NULL".to_owned(), |process| format!("'{process}'"));
    uow.connection()
        .await?
        .execute_unprepared(&format!(
            "INSERT INTO effects (aggregate_id, sequence, process) VALUES ('{}', {}, {process})",
            message.aggregate_id, message.sequence
        ))
        .await?;
    Ok(())
}

/// [`apply_as`], after taking a lock on the aggregate held until the
/// transaction ends (PostgreSQL: `pg_advisory_xact_lock`): two
/// transactions applying one aggregate's events side by side then commit
/// in the order they wrote their rows, so an event applied before an
/// earlier one of its aggregate (by another process, in parallel) shows in
/// the effects' order, which [`assert_each_applied_once_in_order`] checks.
pub async fn apply_locked(
    uow: &mut UnitOfWork,
    delivery: &Delivery,
    process: Option<&str>,
) -> Result<(), HandlerError> {
    let aggregate = delivery.message().aggregate_id.replace('\'', "''");
    uow.connection()
        .await?
        .execute_unprepared(&format!(
            "SELECT pg_advisory_xact_lock(hashtext('{aggregate}'))"
        ))
        .await?;
    apply_as(uow, delivery, process).await
}

/// The applied sequences of each aggregate, in the order they were applied.
pub async fn applied(test: &TestDb) -> HashMap<String, Vec<i64>> {
    per_aggregate(
        test,
        "SELECT aggregate_id, sequence FROM effects ORDER BY id",
    )
    .await
}

/// Asserts that the effects are exactly the rows of the outbox `table`:
/// each aggregate's sequences once each, in sequence order.
pub async fn assert_each_applied_once_in_order(test: &TestDb, table: &str) {
    let written = per_aggregate(
        test,
        &format!("SELECT aggregate_id, sequence FROM {table} ORDER BY sequence"),
    )
    .await;
    let applied = applied(test).await;
    let mut aggregates: Vec<&String> = written.keys().chain(applied.keys()).collect();
    aggregates.sort();
    aggregates.dedup();
    let wrong: Vec<_> = aggregates
        .into_iter()
        .map(|aggregate| (aggregate, written.get(aggregate), applied.get(aggregate)))
        .filter(|(_, written, applied)| written != applied)
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {} aggregates not applied once each in order; first (aggregate, written, applied): {:?}",
        wrong.len(),
        written.len(),
        wrong.first()
    );
}

async fn per_aggregate(test: &TestDb, sql: &str) -> HashMap<String, Vec<i64>> {
    let mut out: HashMap<String, Vec<i64>> = HashMap::new();
    for row in test.rows(sql).await {
        let aggregate: String = row.try_get("", "aggregate_id").expect("aggregate_id");
        let sequence: i64 = row.try_get("", "sequence").expect("sequence");
        out.entry(aggregate).or_default().push(sequence);
    }
    out
}

/// The `deliveries` table: one row per applied message with the delivery
/// count it was applied on, for tests that check an outage or a stall
/// spent no delivery.
///
/// # Panics
/// When the database refuses the statement.
pub async fn create_deliveries_table(test: &TestDb) {
    let id = id_column(test);
    test.db
        .execute_unprepared(&format!(
            "CREATE TABLE deliveries ({id}, aggregate_id varchar(64) NOT NULL, \
             sequence bigint NOT NULL, delivery bigint NOT NULL)"
        ))
        .await
        .expect("deliveries table");
}

/// Applies the delivered event as a row of `deliveries` (its aggregate,
/// sequence and delivery count), in the handler's unit of work.
pub async fn apply_delivery(uow: &mut UnitOfWork, delivery: &Delivery) -> Result<(), HandlerError> {
    uow.connection()
        .await?
        .execute_unprepared(&format!(
            "INSERT INTO deliveries (aggregate_id, sequence, delivery) VALUES ('{}', {}, {})",
            delivery.aggregate_id(),
            delivery.sequence(),
            delivery.delivery_count()
        ))
        .await?;
    Ok(())
}

/// An `id` column numbering rows in insert order, on `test`'s backend.
fn id_column(test: &TestDb) -> &'static str {
    match test.backend() {
        crate::Backend::Postgres => "id bigserial PRIMARY KEY",
        crate::Backend::MySql => "id bigint AUTO_INCREMENT PRIMARY KEY",
        crate::Backend::Sqlite => "id INTEGER PRIMARY KEY AUTOINCREMENT",
    }
}
