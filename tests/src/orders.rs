//! The test fixture: an `orders` table, its SeaORM entity, and an `Order`
//! aggregate mapped to it.

use sea_orm::{ConnectionTrait, DbBackend, DbErr, Set};
use serde::{Deserialize, Serialize};
use txoutbox_core::{AggregateRoot, EventBuffer, IntegrationEvent, RecordError};
use txoutbox_sea_orm::AggregateEntity;

/// The SeaORM entity of the `orders` table.
pub mod entity {
    use sea_orm::entity::prelude::*;

    /// One order row.
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "orders")]
    pub struct Model {
        /// The order id.
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        /// Status text.
        pub status: String,
        /// Total in cents.
        pub total_cents: i64,
        /// Optimistic-concurrency version.
        pub version: i64,
    }

    /// No relations.
    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// Creates the `orders` table.
pub async fn create_table(db: &impl ConnectionTrait) -> Result<(), DbErr> {
    let text = match db.get_database_backend() {
        DbBackend::MySql => "VARCHAR(64)",
        _ => "TEXT",
    };
    db.execute_unprepared(&format!(
        "CREATE TABLE orders (id {text} NOT NULL PRIMARY KEY, status {text} NOT NULL, \
         total_cents BIGINT NOT NULL, version BIGINT NOT NULL)"
    ))
    .await
    .map(|_| ())
}

/// An order was placed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "test.order.placed")]
pub struct OrderPlaced {
    /// The order.
    pub order_id: String,
    /// Total in cents.
    pub total_cents: i64,
}

/// An order's total changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "test.order.amended")]
pub struct OrderAmended {
    /// The order.
    pub order_id: String,
    /// The new total.
    pub total_cents: i64,
}

/// The order aggregate.
#[derive(Debug, AggregateRoot)]
#[aggregate(type = "order")]
pub struct Order {
    /// The id.
    #[aggregate(id)]
    pub id: String,
    /// The status.
    pub status: String,
    /// The total in cents.
    pub total_cents: i64,
    events: EventBuffer,
}

impl Order {
    /// Places a new order, recording `OrderPlaced`.
    pub fn place(id: impl Into<String>, total_cents: i64) -> Result<Self, RecordError> {
        let id = id.into();
        let mut order = Self {
            id: id.clone(),
            status: "placed".into(),
            total_cents,
            events: EventBuffer::new(),
        };
        order.record(OrderPlaced {
            order_id: id,
            total_cents,
        })?;
        Ok(order)
    }

    /// Changes the total, recording `OrderAmended`.
    pub fn amend(&mut self, total_cents: i64) -> Result<(), RecordError> {
        self.total_cents = total_cents;
        let order_id = self.id.clone();
        self.record(OrderAmended {
            order_id,
            total_cents,
        })
    }
}

impl AggregateEntity for Order {
    type Entity = entity::Entity;

    fn version_column() -> entity::Column {
        entity::Column::Version
    }

    fn from_model(model: entity::Model, events: EventBuffer) -> Self {
        Self {
            id: model.id,
            status: model.status,
            total_cents: model.total_cents,
            events,
        }
    }

    fn to_active_model(&self) -> entity::ActiveModel {
        entity::ActiveModel {
            id: Set(self.id.clone()),
            status: Set(self.status.clone()),
            total_cents: Set(self.total_cents),
            ..Default::default()
        }
    }
}
