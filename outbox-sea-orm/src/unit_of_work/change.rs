//! What saving or deleting one aggregate writes, shared by the unit of
//! work, the repository and a joined transaction: the aggregate's
//! statement, its messages and new version; and loading it back.

use sea_orm::{EntityTrait, ModelTrait, PrimaryKeyTrait};
use txoutbox_core::{AggregateChanges, MessageContext};

use super::version::read_version;
use super::write::AggregateWrite;
use crate::aggregate_entity::AggregateEntity;
use crate::error::OutboxError;
use crate::shared::Shared;

/// What a unit of work does to an aggregate's row.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Change {
    /// Insert it (version 0) or update it at its loaded version.
    Save,
    /// Delete it at its loaded version.
    Delete,
}

/// The primary key value type of an aggregate's entity.
pub type PrimaryKeyOf<A> =
    <<<A as AggregateEntity>::Entity as EntityTrait>::PrimaryKey as PrimaryKeyTrait>::ValueType;

/// The statement that writes `change` of `aggregate`, and the messages and
/// new version it makes.
pub(super) fn prepare<A: AggregateEntity>(
    shared: &Shared,
    context: &MessageContext,
    aggregate: &A,
    change: Change,
) -> Result<(AggregateWrite, AggregateChanges), OutboxError> {
    let changes = AggregateChanges::of(aggregate, context, shared.config.subject_prefix());
    let backend = shared.db.get_database_backend();
    let write = match change {
        Change::Save => AggregateWrite::save(aggregate, &changes, backend)?,
        Change::Delete => AggregateWrite::delete(aggregate, &changes, backend)?,
    };
    Ok((write, changes))
}

/// Loads an aggregate by primary key on `db`, at its stored version.
pub(crate) async fn load<A: AggregateEntity>(
    db: &impl sea_orm::ConnectionTrait,
    id: impl Into<PrimaryKeyOf<A>>,
) -> Result<Option<A>, OutboxError> {
    let Some(model) = A::Entity::find_by_id(id).one(db).await? else {
        return Ok(None);
    };
    let version = read_version(model.get(A::version_column()))?;
    Ok(Some(A::from_model(
        model,
        txoutbox_core::EventBuffer::at_version(version),
    )))
}
