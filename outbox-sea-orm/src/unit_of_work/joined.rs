//! [`Joined`]: saving aggregates on a transaction the application owns.

use sea_orm::ConnectionTrait;
use txoutbox_core::{IntegrationEvent, MessageContext, MessageId, OutboxMessage, PendingMessage};

use super::change::{Change, PrimaryKeyOf, load, prepare};
use crate::aggregate_entity::AggregateEntity;
use crate::error::OutboxError;
use crate::row::insert_messages;
use crate::shared::Shared;
use std::sync::Arc;

/// Aggregates and events written into a transaction (or connection) the
/// application owns: the adoption path for a service that already has its
/// write sites and transactions. Obtained from [`Outbox::join`](crate::Outbox::join).
///
/// Each [`save`](Joined::save), [`delete`](Joined::delete) and
/// [`enqueue`](Joined::enqueue) writes at once, in the application's
/// transaction: the aggregate's row at its checked version, and its events
/// as outbox rows with their per-aggregate sequence numbers, exactly as a
/// [`UnitOfWork`](crate::UnitOfWork) writes them, so the processor
/// publishes them in the same order with the same guarantees. The commit
/// (or rollback) stays the application's: the events are in the outbox if
/// and only if it commits.
///
/// After the commit, [`AfterCommit::wake`] hands the messages to this
/// process's processor (it publishes them at once, without a claim) and
/// wakes processors elsewhere; without it they are found by the next
/// claim, within `poll_interval`.
///
/// ```no_run
/// # use txoutbox_sea_orm::{AggregateEntity, Outbox};
/// # async fn run<Order: AggregateEntity>(outbox: Outbox, mut order: Order) -> Result<(), Box<dyn std::error::Error>> {
/// use sea_orm::{ConnectionTrait, TransactionTrait};
///
/// let txn = outbox.db().begin().await?;                   // the application's transaction
/// txn.execute_unprepared("UPDATE stock SET reserved = reserved + 1").await?;
/// let mut joined = outbox.join(&txn);
/// joined.save(&mut order).await?;                         // state + events, in `txn`
/// let written = joined.after_commit();
/// txn.commit().await?;                                    // the application commits
/// written.wake();                                         // published at once
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Joined<'t, C> {
    shared: Arc<Shared>,
    txn: &'t C,
    context: MessageContext,
    messages: Vec<OutboxMessage>,
}

impl<'t, C: ConnectionTrait> Joined<'t, C> {
    pub(crate) fn new(shared: Arc<Shared>, txn: &'t C, context: MessageContext) -> Self {
        Self {
            shared,
            txn,
            context,
            messages: Vec::new(),
        }
    }

    /// The context stamped on the messages written here.
    pub fn context(&self) -> &MessageContext {
        &self.context
    }

    /// Loads an aggregate by primary key, in the application's transaction.
    pub async fn load<A: AggregateEntity>(
        &self,
        id: impl Into<PrimaryKeyOf<A>>,
    ) -> Result<Option<A>, OutboxError> {
        load(self.txn, id).await
    }

    /// Writes the aggregate's state and its recorded events into the
    /// application's transaction: inserts a new aggregate (version 0), or
    /// updates it if its stored version is still the one it was loaded at,
    /// failing with [`OutboxError::ConcurrencyConflict`] otherwise (roll the
    /// transaction back then). On success the aggregate is at its new
    /// version with no pending events; should the application roll back
    /// after all, reload it.
    pub async fn save<A: AggregateEntity>(&mut self, aggregate: &mut A) -> Result<(), OutboxError> {
        self.apply(aggregate, Change::Save).await
    }

    /// Deletes the aggregate's row if its stored version is still the loaded
    /// one, and writes the events it recorded, as [`save`](Joined::save).
    pub async fn delete<A: AggregateEntity>(
        &mut self,
        aggregate: &mut A,
    ) -> Result<(), OutboxError> {
        self.apply(aggregate, Change::Delete).await
    }

    async fn apply<A: AggregateEntity>(
        &mut self,
        aggregate: &mut A,
        change: Change,
    ) -> Result<(), OutboxError> {
        let (write, mut changes) = prepare(&self.shared, &self.context, &*aggregate, change)?;
        write.execute(self.txn, self.shared.config.table()).await?;
        self.insert(&mut changes.messages).await?;
        aggregate.events_mut().mark_saved(changes.new_version);
        Ok(())
    }

    /// Writes an event that belongs to no aggregate (see
    /// [`STANDALONE`](crate::STANDALONE)).
    pub async fn enqueue<E: IntegrationEvent>(
        &mut self,
        event: &E,
    ) -> Result<MessageId, OutboxError> {
        let message = self
            .shared
            .standalone(PendingMessage::new(event)?, &self.context);
        let id = message.id;
        self.insert(&mut vec![message]).await?;
        Ok(id)
    }

    async fn insert(&mut self, messages: &mut Vec<OutboxMessage>) -> Result<(), OutboxError> {
        insert_messages(self.txn, self.shared.config.table(), messages).await?;
        self.messages.append(messages);
        Ok(())
    }

    /// Ends the borrow of the transaction, so the application can commit
    /// it; call [`AfterCommit::wake`] once it has.
    pub fn after_commit(self) -> AfterCommit {
        AfterCommit {
            shared: self.shared,
            messages: self.messages,
        }
    }
}

/// The messages a [`Joined`] wrote, to announce once the application's
/// transaction committed.
#[derive(Debug)]
#[must_use = "call `wake` after the commit, or processors find the messages only at their next claim"]
pub struct AfterCommit {
    shared: Arc<Shared>,
    messages: Vec<OutboxMessage>,
}

impl AfterCommit {
    /// The ids of the messages written, in order.
    pub fn ids(&self) -> Vec<MessageId> {
        self.messages.iter().map(|m| m.id).collect()
    }

    /// Announces the committed messages: this process's processor takes
    /// them by id (no query to find them), processors elsewhere are woken
    /// (PostgreSQL `NOTIFY`). Call it only after the commit succeeded;
    /// after a rollback, drop it. Returns the messages' ids.
    pub fn wake(self) -> Vec<MessageId> {
        let ids = self.ids();
        self.shared.announce(self.messages);
        ids
    }
}
