//! [`UnitOfWork`]: aggregates and their events, committed together.

use outbox_core::{
    AggregateChanges, IntegrationEvent, MessageContext, MessageId, OutboxMessage, PendingMessage,
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseTransaction, DbBackend, DbErr,
    EntityTrait, ModelTrait, PrimaryKeyTrait, QueryFilter, SqlErr, Value,
};

use crate::aggregate_entity::AggregateEntity;
use crate::error::OutboxError;
use crate::outbox::Outbox;
use crate::row::insert_messages;

/// The primary key value type of an aggregate's entity.
pub type PrimaryKeyOf<A> =
    <<<A as AggregateEntity>::Entity as EntityTrait>::PrimaryKey as PrimaryKeyTrait>::ValueType;

/// One database transaction in which aggregates are saved with the events
/// they recorded: both commit, or neither does.
///
/// Dropping it without [`commit`](UnitOfWork::commit), an error, or a panic
/// rolls everything back. The application's own SeaORM statements run in the
/// same transaction through [`connection`](UnitOfWork::connection).
///
/// ```no_run
/// # use outbox_sea_orm::{AggregateEntity, Outbox};
/// # async fn run<Order: AggregateEntity>(outbox: Outbox, mut order: Order) -> Result<(), outbox_sea_orm::OutboxError> {
/// let mut uow = outbox.begin().await?;
/// uow.save(&mut order).await?;      // state + its events as outbox rows
/// uow.commit().await?;              // ... in one transaction; processors are woken
/// # Ok(()) }
/// ```
pub struct UnitOfWork {
    txn: DatabaseTransaction,
    outbox: Outbox,
    context: MessageContext,
    messages: Vec<OutboxMessage>,
}

impl std::fmt::Debug for UnitOfWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnitOfWork")
            .field("context", &self.context)
            .field("messages", &self.messages.len())
            .finish_non_exhaustive()
    }
}

impl UnitOfWork {
    pub(crate) fn new(txn: DatabaseTransaction, outbox: Outbox, context: MessageContext) -> Self {
        Self {
            txn,
            outbox,
            context,
            messages: Vec::new(),
        }
    }

    /// The transaction, for the application's own SeaORM statements.
    pub fn connection(&self) -> &DatabaseTransaction {
        &self.txn
    }

    /// The context stamped on this unit's messages.
    pub fn context(&self) -> &MessageContext {
        &self.context
    }

    /// Loads an aggregate by primary key, inside this transaction.
    pub async fn load<A: AggregateEntity>(
        &self,
        id: impl Into<PrimaryKeyOf<A>>,
    ) -> Result<Option<A>, OutboxError> {
        load(&self.txn, id).await
    }

    /// Saves the aggregate's state and queues its recorded events: inserts a
    /// new aggregate (version 0), or updates it if its stored version is
    /// still the one it was loaded at. Fails with
    /// [`OutboxError::ConcurrencyConflict`] otherwise; the unit of work
    /// should then be dropped. On success the aggregate is at its new version
    /// with no pending events.
    pub async fn save<A: AggregateEntity>(&mut self, aggregate: &mut A) -> Result<(), OutboxError> {
        let new_version = self.write_save(&*aggregate).await?;
        aggregate.events_mut().mark_saved(new_version);
        Ok(())
    }

    /// Writes what [`save`](UnitOfWork::save) writes and returns the new
    /// version, leaving the aggregate untouched (the repository marks it
    /// saved only once the commit succeeded).
    pub(crate) async fn write_save<A: AggregateEntity>(
        &mut self,
        aggregate: &A,
    ) -> Result<u64, OutboxError> {
        let changes = AggregateChanges::of(
            aggregate,
            &self.context,
            self.outbox.config().subject_prefix(),
        );
        // `to_active_model` is the whole state: values a model marked
        // `Unchanged` (e.g. from `into_active_model()`) must be written too.
        let mut row = aggregate.to_active_model().reset_all();
        set_version::<A>(&mut row, changes.new_version)?;
        let conflict = || conflict(&changes);
        if changes.expected_version == 0 {
            match A::Entity::insert(row)
                .exec_without_returning(&self.txn)
                .await
            {
                Ok(_) => {}
                Err(err) if is_unique_violation(&err) => return Err(conflict()),
                Err(err) => return Err(err.into()),
            }
        } else {
            let expected = version_value(changes.expected_version)?;
            let update = A::Entity::update(row)
                .validate()?
                .filter(A::version_column().eq(expected));
            match update.exec_without_returning(&self.txn).await {
                Ok(_) => {}
                Err(DbErr::RecordNotUpdated) => return Err(conflict()),
                Err(err) => return Err(err.into()),
            }
        }
        self.messages.extend(changes.messages);
        Ok(changes.new_version)
    }

    /// Deletes the aggregate's row if its stored version is still the loaded
    /// one, and queues the events it recorded (e.g. `OrderArchived`).
    pub async fn delete<A: AggregateEntity>(
        &mut self,
        aggregate: &mut A,
    ) -> Result<(), OutboxError> {
        let new_version = self.write_delete(&*aggregate).await?;
        aggregate.events_mut().mark_saved(new_version);
        Ok(())
    }

    /// Writes what [`delete`](UnitOfWork::delete) writes and returns the new
    /// version, leaving the aggregate untouched.
    pub(crate) async fn write_delete<A: AggregateEntity>(
        &mut self,
        aggregate: &A,
    ) -> Result<u64, OutboxError> {
        let changes = AggregateChanges::of(
            aggregate,
            &self.context,
            self.outbox.config().subject_prefix(),
        );
        let expected = version_value(changes.expected_version)?;
        let deleted = A::Entity::delete(aggregate.to_active_model())
            .validate()?
            .filter(A::version_column().eq(expected))
            .exec(&self.txn)
            .await?;
        if deleted.rows_affected == 0 {
            return Err(conflict(&changes));
        }
        self.messages.extend(changes.messages);
        Ok(changes.new_version)
    }

    /// Queues an event that belongs to no aggregate (see
    /// [`STANDALONE`](crate::STANDALONE)).
    pub fn enqueue<E: IntegrationEvent>(&mut self, event: &E) -> Result<MessageId, OutboxError> {
        Ok(self.enqueue_pending(PendingMessage::new(event)?))
    }

    /// Queues an already-recorded message that belongs to no aggregate.
    pub fn enqueue_pending(&mut self, pending: PendingMessage) -> MessageId {
        let message = self.outbox.standalone(pending, &self.context);
        let id = message.id;
        self.messages.push(message);
        id
    }

    /// Writes the queued messages (one multi-row INSERT), commits, then wakes
    /// the processors. Returns the ids of the committed messages.
    ///
    /// When it fails, nothing was written, but the aggregates saved in this
    /// unit are already at their new versions: reload them to retry.
    pub async fn commit(self) -> Result<Vec<MessageId>, OutboxError> {
        let Self {
            txn,
            outbox,
            mut messages,
            ..
        } = self;
        insert_messages(&txn, outbox.config().table(), &mut messages).await?;
        if messages.is_empty() && txn.get_database_backend() == DbBackend::Postgres {
            // PostgreSQL turns COMMIT of a transaction aborted by an earlier
            // failed statement into a silent ROLLBACK. The INSERT above would
            // have failed on such a transaction; with nothing to insert,
            // probe it, so a discarded unit of work is never reported committed.
            txn.execute_unprepared("SELECT 1").await?;
        }
        txn.commit().await?;
        let ids = messages.iter().map(|m| m.id).collect();
        outbox.committed(messages);
        Ok(ids)
    }

    /// Rolls everything back (dropping the unit of work does the same).
    pub async fn rollback(self) -> Result<(), OutboxError> {
        Ok(self.txn.rollback().await?)
    }
}

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
        outbox_core::EventBuffer::at_version(version),
    )))
}

fn conflict(changes: &AggregateChanges) -> OutboxError {
    OutboxError::ConcurrencyConflict {
        aggregate_type: changes.aggregate_type,
        aggregate_id: changes.aggregate_id.clone(),
        expected_version: changes.expected_version,
    }
}

fn is_unique_violation(err: &DbErr) -> bool {
    matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_)))
}

fn version_value(version: u64) -> Result<i64, OutboxError> {
    i64::try_from(version)
        .map_err(|_| OutboxError::InvalidConfig(format!("version {version} does not fit a BIGINT")))
}

/// Sets the version column, whatever integer type it has.
fn set_version<A: AggregateEntity>(
    row: &mut <A::Entity as EntityTrait>::ActiveModel,
    version: u64,
) -> Result<(), OutboxError> {
    let wide = version_value(version)?;
    let column = A::version_column();
    if row.try_set(column, Value::BigInt(Some(wide))).is_ok() {
        return Ok(());
    }
    let narrow = i32::try_from(wide).map_err(|_| {
        OutboxError::InvalidConfig(format!(
            "version {version} does not fit the 32-bit version column"
        ))
    })?;
    row.try_set(column, Value::Int(Some(narrow)))?;
    Ok(())
}

fn read_version(value: Value) -> Result<u64, OutboxError> {
    let version = match value {
        Value::BigInt(Some(v)) => Some(v),
        Value::Int(Some(v)) => Some(i64::from(v)),
        Value::SmallInt(Some(v)) => Some(i64::from(v)),
        Value::BigUnsigned(Some(v)) => i64::try_from(v).ok(),
        Value::Unsigned(Some(v)) => Some(i64::from(v)),
        _ => None,
    };
    version.and_then(|v| u64::try_from(v).ok()).ok_or_else(|| {
        OutboxError::InvalidConfig(format!(
            "version column holds {value:?}, not a non-negative integer"
        ))
    })
}
