// The shop the guide's snippets share: its events, its order aggregate (a
// SeaORM model that is its own aggregate, as in the README's complete
// example), its inbox handler, and the connections a service has at hand.
// A chapter's snippet includes it with one hidden line,
// `# mod shop { include!("shop.rs"); } use shop::*;`, and compiles against it.

use std::error::Error;

use sea_orm::ConnectionTrait;
use sea_orm::sea_query::Query;
use serde::{Deserialize, Serialize};
use txoutbox::events::RecordError;
use txoutbox::{AggregateRoot, Delivery, HandlerError, IntegrationEvent, UnitOfWork};
use txoutbox::{JetStreamPublisher, NatsConnect, Outbox, OutboxConfig};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "order.placed")]
pub struct OrderPlaced {
    pub order_id: String,
    pub total_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "order.paid")]
pub struct OrderPaid {
    pub order_id: String,
    pub amount_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "invoice.issued")]
pub struct InvoiceIssued {
    pub order_id: String,
}

pub mod order {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, Default, DeriveEntityModel, txoutbox::AggregateRoot)]
    #[sea_orm(table_name = "orders")]
    #[aggregate(type = "order", entity = "Entity", version_column = "Column::Version")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        #[aggregate(id)]
        pub id: String,
        pub total_cents: i64,
        pub paid: bool,
        pub version: i64,
        #[sea_orm(ignore)]
        pub events: txoutbox::EventBuffer,
    }
    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}
    impl ActiveModelBehavior for ActiveModel {}
}

/// The aggregate, by the name the chapters use.
pub type Order = order::Model;

impl order::Model {
    pub fn place(id: &str, total_cents: i64) -> Result<Self, RecordError> {
        let mut order = Self { id: id.into(), total_cents, ..Default::default() };
        order.record(OrderPlaced { order_id: id.into(), total_cents })?;
        Ok(order)
    }
    pub fn pay(&mut self) -> Result<(), RecordError> {
        self.paid = true;
        self.record(OrderPaid { order_id: self.id.clone(), amount_cents: self.total_cents })
    }
}

/// The README's inbox handler: its effect commits with the inbox row.
pub async fn on_paid(
    event: OrderPaid,
    _: Delivery,
    uow: &mut UnitOfWork,
) -> Result<(), HandlerError> {
    let insert = Query::insert()
        .into_table("invoices")
        .columns(["order_id", "cents"])
        .values([event.order_id.into(), event.amount_cents.into()])?
        .to_owned();
    uow.connection().await?.execute(&insert).await?;
    Ok(())
}

/// A database and the outbox on it.
pub async fn outbox() -> Result<(sea_orm::DatabaseConnection, Outbox), Box<dyn Error>> {
    let db = sea_orm::Database::connect("sqlite::memory:").await?;
    let outbox = Outbox::new(db.clone(), OutboxConfig::default());
    Ok((db, outbox))
}

/// A NATS connection and a publisher on it.
pub async fn nats() -> Result<(txoutbox::nats::async_nats::Client, JetStreamPublisher), Box<dyn Error>> {
    let nats = NatsConnect::new("127.0.0.1:4222").connect().await?;
    let publisher = JetStreamPublisher::new(nats.clone(), "/orders-service");
    Ok((nats, publisher))
}
