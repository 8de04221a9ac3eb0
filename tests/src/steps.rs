//! The `steps` table of the hold tests: each step a handler applied, with
//! the position it was applied at (a counter of the test's), written in the
//! inbox's transaction, so a test reads back which steps of an aggregate
//! were applied and in what order.

use sea_orm::ConnectionTrait;
use sea_orm::sea_query::{Expr, ExprTrait, Order, Query};
use txoutbox_core::HandlerError;
use txoutbox_sea_orm::UnitOfWork;

use crate::TestDb;

/// Creates the `steps` table in `test`'s schema.
///
/// # Panics
/// When the database refuses the statement.
pub async fn create_table(test: &TestDb) {
    test.db
        .execute_unprepared(
            "CREATE TABLE steps (aggregate_id VARCHAR(64) NOT NULL, step BIGINT NOT NULL, \
             position BIGINT NOT NULL)",
        )
        .await
        .expect("create the steps table");
}

/// Records `step` of `aggregate_id`, applied at `position`, in `uow`'s
/// transaction (values bound, not formatted).
pub async fn record(
    uow: &mut UnitOfWork,
    aggregate_id: &str,
    step: i64,
    position: i64,
) -> Result<(), HandlerError> {
    let insert = Query::insert()
        .into_table("steps")
        .columns(["aggregate_id", "step", "position"])
        .values([aggregate_id.into(), step.into(), position.into()])?
        .to_owned();
    uow.connection().await?.execute(&insert).await?;
    Ok(())
}

/// The steps applied to `aggregate`, in the order they were applied.
///
/// # Panics
/// When the table cannot be read.
pub async fn applied(test: &TestDb, aggregate: &str) -> Vec<i64> {
    let select = Query::select()
        .column("step")
        .from("steps")
        .and_where(Expr::col("aggregate_id").eq(aggregate))
        .order_by("position", Order::Asc)
        .to_owned();
    test.db
        .query_all(&select)
        .await
        .expect("read the steps")
        .iter()
        .map(|row| row.try_get::<i64>("", "step").expect("a step"))
        .collect()
}
