//! The orders service's use cases, as it runs them: functions taking the
//! service's [`Outbox`], each one transaction (retried on a conflict with
//! another writer). `metrics_endpoint` serves them; `testing_a_service`
//! tests these very functions on a real `Outbox` (SQLite in memory, the
//! testing kit's `SqliteOutbox`).

use txoutbox::{Outbox, sea_orm::OutboxError};

use crate::orders::{Order, OrderError};

/// Why a use case failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    /// No order with this id.
    #[error("no order {0}")]
    NotFound(String),
    /// The order refused the change.
    #[error(transparent)]
    Order(#[from] OrderError),
    /// The outbox (the database) failed.
    #[error(transparent)]
    Outbox(#[from] OutboxError),
}

/// Places an order: the order row and its `OrderPlaced`, in one
/// transaction.
///
/// ```no_run
/// # async fn run(outbox: txoutbox::Outbox) -> Result<(), txoutbox_examples::checkout::CheckoutError> {
/// txoutbox_examples::checkout::place_order(&outbox, "o-1", "ada", 1250).await?;
/// # Ok(()) }
/// ```
pub async fn place_order(
    outbox: &Outbox,
    id: &str,
    customer: &str,
    total_cents: u64,
) -> Result<(), CheckoutError> {
    outbox
        .transaction(async |mut uow| {
            let mut order = Order::place(id, customer, total_cents)?;
            uow.save(&mut order).await?;
            Ok(())
        })
        .await
}

/// Takes the payment of an order: loads it, records `OrderPaid`, saves it;
/// run again from the load if another writer changed the order meanwhile.
///
/// ```no_run
/// # async fn run(outbox: txoutbox::Outbox) -> Result<(), txoutbox_examples::checkout::CheckoutError> {
/// txoutbox_examples::checkout::pay_order(&outbox, "o-1").await?;
/// # Ok(()) }
/// ```
pub async fn pay_order(outbox: &Outbox, id: &str) -> Result<(), CheckoutError> {
    outbox
        .transaction(async |mut uow| {
            let mut order = uow
                .load::<Order>(id.to_owned())
                .await?
                .ok_or_else(|| CheckoutError::NotFound(id.to_owned()))?;
            order.pay()?;
            uow.save(&mut order).await?;
            Ok(())
        })
        .await
}
