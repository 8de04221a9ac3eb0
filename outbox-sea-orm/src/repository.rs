//! [`Repository`]: load, save and delete one aggregate type.

use std::marker::PhantomData;
use std::sync::Arc;

use txoutbox_core::MessageContext;

use crate::aggregate_entity::AggregateEntity;
use crate::error::OutboxError;
use crate::shared::Shared;
use crate::unit_of_work::{Change, PrimaryKeyOf, UnitOfWork, load};

/// Loads and saves `A` aggregates, each save in a unit of work of its own.
/// (To save several aggregates atomically, use a
/// [`UnitOfWork`](crate::UnitOfWork) directly.) Get one with
/// [`Outbox::repository`](crate::Outbox::repository).
///
/// ```no_run
/// # use txoutbox_sea_orm::{AggregateEntity, Outbox};
/// # async fn run<Order: AggregateEntity>(outbox: Outbox) -> Result<(), txoutbox_sea_orm::OutboxError>
/// # where txoutbox_sea_orm::PrimaryKeyOf<Order>: From<&'static str> {
/// let orders = outbox.repository::<Order>();
/// if let Some(mut order) = orders.load("o-1").await? {
///     // order.pay()?;
///     orders.save(&mut order).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Repository<A> {
    pub(crate) shared: Arc<Shared>,
    pub(crate) aggregate: PhantomData<fn() -> A>,
}

impl<A> Clone for Repository<A> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            aggregate: PhantomData,
        }
    }
}

impl<A: AggregateEntity> Repository<A> {
    /// Loads an aggregate by primary key.
    pub async fn load(&self, id: impl Into<PrimaryKeyOf<A>>) -> Result<Option<A>, OutboxError> {
        load(&self.shared.db, id).await
    }

    /// Saves the aggregate and its events in one transaction.
    pub async fn save(&self, aggregate: &mut A) -> Result<(), OutboxError> {
        self.save_with(aggregate, MessageContext::new()).await
    }

    /// Saves the aggregate and its events, stamped with `context`. When it
    /// fails, nothing was written and the aggregate is as it was: still at
    /// its loaded version, with its recorded events.
    pub async fn save_with(
        &self,
        aggregate: &mut A,
        context: MessageContext,
    ) -> Result<(), OutboxError> {
        self.commit_change(aggregate, context, Change::Save).await
    }

    /// Deletes the aggregate and writes the events it recorded, in one
    /// transaction. When it fails, the aggregate is as it was.
    pub async fn delete(&self, aggregate: &mut A) -> Result<(), OutboxError> {
        self.commit_change(aggregate, MessageContext::new(), Change::Delete)
            .await
    }

    /// One unit of work for `change`; the aggregate is marked saved only
    /// once it committed.
    async fn commit_change(
        &self,
        aggregate: &mut A,
        context: MessageContext,
        change: Change,
    ) -> Result<(), OutboxError> {
        let mut uow = UnitOfWork::new(Arc::clone(&self.shared), context);
        let new_version = uow.write_change(&*aggregate, change).await?;
        uow.commit().await?;
        aggregate.events_mut().mark_saved(new_version);
        Ok(())
    }
}
