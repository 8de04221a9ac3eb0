//! Mapping an aggregate to a SeaORM entity.

use sea_orm::EntityTrait;
use txoutbox_core::{AggregateRoot, EventBuffer};

/// An aggregate stored as one row of a SeaORM entity, with a version column
/// for optimistic concurrency.
///
/// The repository reads and writes the version column itself: the mapping
/// only moves the aggregate's own state. A SeaORM model can be the aggregate
/// (the "entity is the aggregate" style), or a domain struct can map to one:
///
/// ```
/// use txoutbox_core::{AggregateRoot, EventBuffer};
/// use txoutbox_sea_orm::AggregateEntity;
/// use sea_orm::entity::prelude::*;
/// use sea_orm::Set;
///
/// mod order {
///     use sea_orm::entity::prelude::*;
///     #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
///     #[sea_orm(table_name = "orders")]
///     pub struct Model {
///         #[sea_orm(primary_key, auto_increment = false)]
///         pub id: String,
///         pub status: String,
///         pub version: i64,
///     }
///     #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
///     pub enum Relation {}
///     impl ActiveModelBehavior for ActiveModel {}
/// }
///
/// #[derive(AggregateRoot)]
/// #[aggregate(type = "order")]
/// struct Order { #[aggregate(id)] id: String, status: String, events: EventBuffer }
///
/// impl AggregateEntity for Order {
///     type Entity = order::Entity;
///     fn version_column() -> order::Column { order::Column::Version }
///     fn from_model(model: order::Model, events: EventBuffer) -> Self {
///         Order { id: model.id, status: model.status, events }
///     }
///     fn to_active_model(&self) -> order::ActiveModel {
///         order::ActiveModel { id: Set(self.id.clone()), status: Set(self.status.clone()), ..Default::default() }
///     }
/// }
/// ```
///
/// When the model is the aggregate, `#[derive(AggregateRoot)]` writes this
/// trait too, given the entity and the version column (paths as seen from
/// the model's module). `from_model` keeps the row and takes the buffer;
/// `to_active_model` is `self.clone().into_active_model()`:
///
/// ```
/// use txoutbox_core::{AggregateRoot, EventBuffer};
/// use txoutbox_sea_orm::AggregateEntity;
///
/// mod account {
///     use sea_orm::entity::prelude::*;
///
///     #[derive(Clone, Debug, PartialEq, DeriveEntityModel, txoutbox_core::AggregateRoot)]
///     #[sea_orm(table_name = "accounts")]
///     #[aggregate(type = "account", entity = "Entity", version_column = "Column::Version")]
///     pub struct Model {
///         #[sea_orm(primary_key, auto_increment = false)]
///         #[aggregate(id)]
///         pub id: i64,
///         pub balance: i64,
///         pub version: i64,
///         #[sea_orm(ignore)]
///         pub events: txoutbox_core::EventBuffer,
///     }
///     #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
///     pub enum Relation {}
///     impl ActiveModelBehavior for ActiveModel {}
/// }
///
/// let row = account::Model { id: 7, balance: 100, version: 3, events: EventBuffer::default() };
/// let account = account::Model::from_model(row, EventBuffer::at_version(3));
/// assert_eq!((account.aggregate_id(), account.version()), ("7".to_owned(), 3));
/// assert_eq!(account.to_active_model().balance.as_ref(), &100);
/// ```
pub trait AggregateEntity: AggregateRoot + Sized + Send + Sync {
    /// The SeaORM entity holding the aggregate's row.
    type Entity: EntityTrait;

    /// The integer column holding the version.
    fn version_column() -> <Self::Entity as EntityTrait>::Column;

    /// Rebuilds the aggregate from its row; `events` carries the row's version.
    fn from_model(model: <Self::Entity as EntityTrait>::Model, events: EventBuffer) -> Self;

    /// The row for the aggregate's current state, primary key included. The
    /// version column is set by the repository.
    fn to_active_model(&self) -> <Self::Entity as EntityTrait>::ActiveModel;
}
