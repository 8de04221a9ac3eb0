//! Where orders live: the SeaORM entity of the `demo_orders` table and the
//! [`AggregateEntity`] mapping that lets the outbox repository load and save
//! an [`Order`] together with the events it recorded.

use sea_orm::{ConnectionTrait, DbErr, Set};
use txoutbox::EventBuffer;
use txoutbox::sea_orm::AggregateEntity;

use crate::orders::{Order, OrderStatus};

/// The `demo_orders` table.
pub mod entity {
    use sea_orm::entity::prelude::*;

    /// One order.
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "demo_orders")]
    pub struct Model {
        /// The order id.
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        /// Total in cents.
        pub total_cents: i64,
        /// `placed`, `paid`, `shipped` or `cancelled`.
        pub status: String,
        /// The aggregate version (owned by the repository).
        pub version: i64,
    }

    /// No relations.
    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

impl AggregateEntity for Order {
    type Entity = entity::Entity;

    fn version_column() -> entity::Column {
        entity::Column::Version
    }

    fn from_model(model: entity::Model, events: EventBuffer) -> Self {
        let status = OrderStatus::parse(&model.status).unwrap_or(OrderStatus::Placed);
        let total = u64::try_from(model.total_cents).unwrap_or_default();
        Order::restore(model.id, total, status, events)
    }

    fn to_active_model(&self) -> entity::ActiveModel {
        entity::ActiveModel {
            id: Set(self.id().to_owned()),
            total_cents: Set(i64::try_from(self.total_cents()).unwrap_or(i64::MAX)),
            status: Set(self.status().as_str().to_owned()),
            ..Default::default()
        }
    }
}

/// Creates the `demo_orders` table if it does not exist, on any backend.
pub async fn create_table(db: &impl ConnectionTrait) -> Result<(), DbErr> {
    crate::support::create_entity_table(db, entity::Entity).await
}
