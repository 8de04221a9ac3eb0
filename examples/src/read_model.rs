//! The consumer side of the demo: the `order_summaries` read model, kept up
//! to date by typed handlers for the four order events. Each handler runs
//! through the [`Inbox`], so its update commits together with the record
//! that the message was processed: a redelivered message changes nothing.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, ConnectionTrait, DbErr, Set};
use std::time::Duration;
use txoutbox::nats::IntoJetStream;
use txoutbox::nats::subscriber::{Backoff, SubscriberBuilder};
use txoutbox::{Delivery, HandlerError};
use txoutbox::{Inbox, UnitOfWork};
use txoutbox::{StreamSpec, Subscriber};

use crate::orders::{OrderCancelled, OrderPaid, OrderPlaced, OrderShipped, OrderStatus};

/// The `order_summaries` table: one row per order, as consumers see it.
pub mod entity {
    use sea_orm::entity::prelude::*;

    /// One order's summary.
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "order_summaries")]
    pub struct Model {
        /// The order id.
        #[sea_orm(primary_key, auto_increment = false)]
        pub order_id: String,
        /// The customer.
        pub customer: String,
        /// `placed`, `paid`, `shipped` or `cancelled`.
        pub status: String,
        /// Total in cents.
        pub total_cents: i64,
        /// When the last event was applied.
        pub updated_at: DateTimeUtc,
    }

    /// No relations.
    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// The durable consumer's name, also the inbox's consumer name.
pub const CONSUMER: &str = "order-summaries";

/// Creates the `order_summaries` table if it does not exist, on any backend.
pub async fn create_table(db: &impl ConnectionTrait) -> Result<(), DbErr> {
    crate::support::create_entity_table(db, entity::Entity).await
}

/// Moves an existing summary to `status`.
async fn set_status(
    uow: &mut UnitOfWork,
    order_id: String,
    status: OrderStatus,
) -> Result<(), HandlerError> {
    entity::ActiveModel {
        order_id: Set(order_id),
        status: Set(status.as_str().to_owned()),
        updated_at: Set(Utc::now()),
        ..Default::default()
    }
    .update(uow.connection().await?)
    .await?; // no row yet: an error, so the message is retried
    Ok(())
}

/// The read model's subscriber: a durable pull consumer [`CONSUMER`] on
/// `stream`, one typed handler per order event, each through `inbox`.
/// `nats` is the service's NATS client or a JetStream context; its tests
/// (`testing_a_service`) run this very builder in process, with the testing
/// kit's `TestSubscriber`.
pub fn subscriber(
    nats: impl IntoJetStream,
    inbox: &Inbox,
    stream: &str,
    filter_subject: &str,
) -> SubscriberBuilder {
    Subscriber::builder(nats, CONSUMER)
        .stream(stream)
        .filter_subject(filter_subject)
        // Dead letters (`dlq.order-summaries`) are kept in the README's
        // `DLQ` stream (`dlq.>`), one for every consumer: `outbox dlq list`.
        .dead_letter_stream(StreamSpec::dead_letters())
        .backoff(Backoff::exponential(
            Duration::from_millis(100),
            Duration::from_secs(5),
        ))
        .shutdown_timeout(Duration::from_secs(5))
        .on(inbox.handler(on_placed))
        .on(inbox.handler(on_paid))
        .on(inbox.handler(on_shipped))
        .on(inbox.handler(on_cancelled))
}

/// A new row for the placed order.
pub async fn on_placed(
    e: OrderPlaced,
    _: Delivery,
    uow: &mut UnitOfWork,
) -> Result<(), HandlerError> {
    entity::ActiveModel {
        order_id: Set(e.order_id),
        customer: Set(e.customer),
        status: Set(OrderStatus::Placed.as_str().to_owned()),
        total_cents: Set(i64::try_from(e.total_cents).unwrap_or(i64::MAX)),
        updated_at: Set(Utc::now()),
    }
    .insert(uow.connection().await?)
    .await?;
    Ok(())
}

/// The order is paid.
pub async fn on_paid(e: OrderPaid, _: Delivery, uow: &mut UnitOfWork) -> Result<(), HandlerError> {
    set_status(uow, e.order_id, OrderStatus::Paid).await
}

/// The order is shipped.
pub async fn on_shipped(
    e: OrderShipped,
    _: Delivery,
    uow: &mut UnitOfWork,
) -> Result<(), HandlerError> {
    set_status(uow, e.order_id, OrderStatus::Shipped).await
}

/// The order is cancelled.
pub async fn on_cancelled(
    e: OrderCancelled,
    _: Delivery,
    uow: &mut UnitOfWork,
) -> Result<(), HandlerError> {
    set_status(uow, e.order_id, OrderStatus::Cancelled).await
}
