//! [`UnitOfWork`]: aggregates and their events, committed together.

mod change;
mod joined;
mod one_statement;
mod version;
mod write;

use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, TransactionTrait};
use txoutbox_core::{
    AggregateChanges, IntegrationEvent, MessageContext, MessageId, OutboxMessage, PendingMessage,
};

pub use self::change::PrimaryKeyOf;
use self::change::prepare;
pub(crate) use self::change::{Change, load};
pub use self::joined::{AfterCommit, Joined};
use self::write::AggregateWrite;
use crate::aggregate_entity::AggregateEntity;
use crate::config::TableName;
use crate::dialect::Dialect;
use crate::error::OutboxError;
use crate::row::{LeaseAtCommit, insert_messages};
use crate::shared::Shared;
use std::sync::Arc;

/// Aggregates and the events they recorded, committed together: both, or
/// neither.
///
/// A unit of work opens its database transaction only when something needs
/// it: [`connection`](UnitOfWork::connection) (the application's own
/// statements), or a [`load`](UnitOfWork::load) after a save. Until then
/// [`save`](UnitOfWork::save) and [`delete`](UnitOfWork::delete) only
/// prepare their statements, and [`commit`](UnitOfWork::commit) sends
/// them. A unit that saved one aggregate (with its events, and any
/// standalone events) commits as **one statement** on PostgreSQL, which
/// the database commits on its own: one round trip instead of `BEGIN`,
/// two `INSERT`s and `COMMIT`. While a processor of this process runs (one
/// from [`Outbox::processor`](crate::Outbox::processor)), that statement also writes the messages
/// already leased to it, unless an earlier message of their aggregate is
/// still unpublished, and hands them over after the commit: the processor
/// publishes them without claiming them first. Otherwise the commit opens a transaction,
/// writes the aggregates in the order they were saved, then the messages,
/// and commits. Once the transaction is open, saves and deletes are written
/// at once.
///
/// A concurrency conflict is therefore reported by `save`/`delete` when the
/// transaction is open, and by `commit` otherwise; either way nothing was
/// written. Dropping the unit without committing, an error, or a panic
/// rolls everything back.
///
/// ```no_run
/// # use txoutbox_sea_orm::{AggregateEntity, Outbox};
/// # async fn run<Order: AggregateEntity>(outbox: Outbox, mut order: Order) -> Result<(), txoutbox_sea_orm::OutboxError> {
/// let mut uow = outbox.begin();
/// uow.save(&mut order).await?;      // state + its events as outbox rows
/// uow.commit().await?;              // ... in one transaction; processors are woken
/// # Ok(()) }
/// ```
pub struct UnitOfWork {
    shared: Arc<Shared>,
    context: MessageContext,
    /// Open once something needed it.
    txn: Option<DatabaseTransaction>,
    /// Aggregate writes kept while no transaction is open, in save order.
    pending: Vec<AggregateWrite>,
    messages: Vec<OutboxMessage>,
    /// One of its calls failed with a retryable error (see
    /// [`saw_retryable_failure`](UnitOfWork::saw_retryable_failure)).
    retryable_failure: bool,
    /// Its transaction is an inbox's, lent to it (see
    /// [`within`](Self::within)): if the unit is dropped with it (a
    /// handler panicked, or replaced the unit), it is rolled back as an
    /// inbox transaction ends.
    lent: bool,
}

impl std::fmt::Debug for UnitOfWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnitOfWork")
            .field("context", &self.context)
            .field("transaction_open", &self.txn.is_some())
            .field("pending_writes", &self.pending.len())
            .field("messages", &self.messages.len())
            .field("retryable_failure", &self.retryable_failure)
            .finish_non_exhaustive()
    }
}

impl UnitOfWork {
    pub(crate) fn new(shared: Arc<Shared>, context: MessageContext) -> Self {
        Self {
            shared,
            context,
            txn: None,
            pending: Vec::new(),
            messages: Vec::new(),
            retryable_failure: false,
            lent: false,
        }
    }

    /// A unit inside `txn`, an inbox's transaction (one message's, or a
    /// group's shared by several messages' units one after another):
    /// its statements run in `txn` at once and its messages carry
    /// `context`. It cannot commit (its handler gets it as `&mut`);
    /// [`give_back`](Self::give_back) writes its messages into `txn` and
    /// returns the transaction.
    pub(crate) fn within(
        shared: Arc<Shared>,
        context: MessageContext,
        txn: DatabaseTransaction,
    ) -> Self {
        let mut unit = Self::new(shared, context);
        unit.txn = Some(txn);
        unit.lent = true;
        unit
    }

    /// Ends a unit made by [`within`](Self::within): writes the messages it
    /// queued into the transaction and gives the transaction back (none if
    /// it was lost) with the messages written.
    pub(crate) async fn give_back(
        mut self,
    ) -> (
        Option<DatabaseTransaction>,
        Result<Vec<OutboxMessage>, OutboxError>,
    ) {
        let Some(txn) = self.txn.take() else {
            return (None, Err(OutboxError::GroupTransactionLost));
        };
        let mut messages = std::mem::take(&mut self.messages);
        let written = async {
            for write in self.pending.drain(..) {
                write.execute(&txn, self.shared.config.table()).await?;
            }
            insert_messages(&txn, self.shared.config.table(), &mut messages).await
        }
        .await;
        (Some(txn), written.map(|()| messages))
    }

    /// Whether one of this unit's calls ([`load`](UnitOfWork::load),
    /// [`save`](UnitOfWork::save), [`delete`](UnitOfWork::delete),
    /// [`connection`](UnitOfWork::connection)) failed with an error that
    /// running the unit again from the start may cure
    /// ([`OutboxError::is_retryable`]: contention, a concurrency conflict),
    /// even if the caller turned that error into one of its own, or
    /// swallowed it. [`Outbox::transaction`](crate::Outbox::transaction)
    /// retries on this by default, whatever the caller's error type.
    ///
    /// ```no_run
    /// # async fn run(outbox: txoutbox_sea_orm::Outbox) {
    /// let mut uow = outbox.begin();
    /// assert!(!uow.saw_retryable_failure());
    /// # }
    /// ```
    pub fn saw_retryable_failure(&self) -> bool {
        self.retryable_failure
    }

    /// The result of one of the application's own statements on
    /// [`connection`](UnitOfWork::connection), as an [`OutboxError`]
    /// (contention told apart), noting a retryable failure as the unit's
    /// own calls do: a deadlock in the application's statements is then
    /// retried by [`Outbox::transaction`](crate::Outbox::transaction) too.
    ///
    /// ```no_run
    /// # async fn run(mut uow: txoutbox_sea_orm::UnitOfWork) -> Result<(), txoutbox_sea_orm::OutboxError> {
    /// use sea_orm::ConnectionTrait;
    /// let updated = uow.connection().await?.execute_unprepared("UPDATE stock SET n = n - 1").await;
    /// uow.checked(updated)?;
    /// # Ok(()) }
    /// ```
    pub fn checked<T>(&mut self, result: Result<T, sea_orm::DbErr>) -> Result<T, OutboxError> {
        self.noted(result.map_err(OutboxError::from))
    }

    /// Notes a retryable failure among `result`'s (see
    /// [`saw_retryable_failure`](UnitOfWork::saw_retryable_failure)).
    fn noted<T>(&mut self, result: Result<T, OutboxError>) -> Result<T, OutboxError> {
        if let Err(err) = &result
            && err.is_retryable()
        {
            self.retryable_failure = true;
        }
        result
    }

    /// The unit's transaction, for the application's own SeaORM statements:
    /// opens it (and writes the aggregates saved so far) the first time.
    ///
    /// ```no_run
    /// # async fn run(outbox: txoutbox_sea_orm::Outbox) -> Result<(), Box<dyn std::error::Error>> {
    /// use sea_orm::ConnectionTrait;
    /// let mut uow = outbox.begin();
    /// uow.connection().await?.execute_unprepared("UPDATE stock SET reserved = reserved + 1").await?;
    /// uow.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connection(&mut self) -> Result<&DatabaseTransaction, OutboxError> {
        match self.txn {
            Some(ref txn) => Ok(txn),
            None => {
                let opened = self.open().await;
                let txn = self.noted(opened)?;
                Ok(self.txn.insert(txn))
            }
        }
    }

    /// Begins the transaction and writes the aggregates saved so far.
    async fn open(&mut self) -> Result<DatabaseTransaction, OutboxError> {
        let txn = self.shared.db.begin().await?;
        for write in self.pending.drain(..) {
            write.execute(&txn, self.shared.config.table()).await?;
        }
        Ok(txn)
    }

    /// The context stamped on this unit's messages.
    pub fn context(&self) -> &MessageContext {
        &self.context
    }

    /// Stamps the messages this unit records from now on with `context`
    /// (those recorded before keep theirs): an inbox batch handler
    /// ([`Inbox::batch_handler`](crate::Inbox::batch_handler)) sets each
    /// message's [caused context](txoutbox_core::Delivery::caused_context)
    /// before it records the events that message causes.
    ///
    /// ```no_run
    /// # async fn run(mut uow: txoutbox_sea_orm::UnitOfWork, delivery: txoutbox_core::Delivery) {
    /// uow.set_context(delivery.caused_context());
    /// assert_eq!(uow.context().causation_id(), Some(delivery.message_id().to_string().as_str()));
    /// # }
    /// ```
    pub fn set_context(&mut self, context: MessageContext) {
        self.context = context;
    }

    /// Loads an aggregate by primary key. Inside the unit's transaction if
    /// it is open or this unit has saved something (so the load sees it);
    /// otherwise on its own, as optimistic concurrency needs nothing more:
    /// the save checks the version it loaded.
    pub async fn load<A: AggregateEntity>(
        &mut self,
        id: impl Into<PrimaryKeyOf<A>>,
    ) -> Result<Option<A>, OutboxError> {
        let loaded = if self.txn.is_none() && self.pending.is_empty() {
            load(&self.shared.db, id).await
        } else {
            match self.connection().await {
                Ok(txn) => load(txn, id).await,
                Err(err) => Err(err),
            }
        };
        self.noted(loaded)
    }

    /// Saves the aggregate's state and queues its recorded events: inserts a
    /// new aggregate (version 0), or updates it if its stored version is
    /// still the one it was loaded at. Fails with
    /// [`OutboxError::ConcurrencyConflict`] otherwise (here if the
    /// transaction is open, at [`commit`](UnitOfWork::commit) if not); the
    /// unit of work should then be dropped. On success the aggregate is at
    /// its new version with no pending events.
    pub async fn save<A: AggregateEntity>(&mut self, aggregate: &mut A) -> Result<(), OutboxError> {
        self.apply(aggregate, Change::Save).await
    }

    /// Deletes the aggregate's row if its stored version is still the loaded
    /// one, and queues the events it recorded (e.g. `OrderArchived`). A
    /// conflict is reported as by [`save`](UnitOfWork::save).
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
        let new_version = self.write_change(&*aggregate, change).await?;
        aggregate.events_mut().mark_saved(new_version);
        Ok(())
    }

    /// Writes (or prepares) what [`save`](UnitOfWork::save) or
    /// [`delete`](UnitOfWork::delete) writes and returns the new version,
    /// leaving the aggregate untouched (the repository marks it saved only
    /// once the commit succeeded).
    pub(crate) async fn write_change<A: AggregateEntity>(
        &mut self,
        aggregate: &A,
        change: Change,
    ) -> Result<u64, OutboxError> {
        let (write, changes) = prepare(&self.shared, &self.context, aggregate, change)?;
        let written = self.write(write, changes).await;
        self.noted(written)
    }

    fn backend(&self) -> DbBackend {
        self.shared.db.get_database_backend()
    }

    /// Runs `write` in the open transaction, or keeps it for the commit.
    async fn write(
        &mut self,
        write: AggregateWrite,
        changes: AggregateChanges,
    ) -> Result<u64, OutboxError> {
        match &self.txn {
            Some(txn) => write.execute(txn, self.shared.config.table()).await?,
            None => self.pending.push(write),
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
        let message = self.shared.standalone(pending, &self.context);
        let id = message.id;
        self.messages.push(message);
        id
    }

    /// Writes what is still unwritten and commits, then wakes the
    /// processors. Returns the ids of the committed messages.
    ///
    /// When it fails, nothing was written, but the aggregates saved in this
    /// unit are already at their new versions: reload them to retry.
    pub async fn commit(mut self) -> Result<Vec<MessageId>, OutboxError> {
        let mut messages = std::mem::take(&mut self.messages);
        let dialect = Dialect::of(self.backend());
        let mut leased = None;
        if self.txn.is_none() && one_statement::fits(dialect, self.pending.len(), messages.len()) {
            let (db, table) = (&self.shared.db, self.shared.config.table());
            // PostgreSQL, with a processor in this process: write the
            // messages leased to it, so it publishes them without a claim.
            // Not with a delayed message: written leased, it (or a later
            // message of its aggregate in this commit) would be handed over
            // and published before it is due.
            let delayed = messages.iter().any(|m| m.deliver_at.is_some());
            let mut entered = (dialect == Dialect::Postgres && !messages.is_empty() && !delayed)
                .then(|| self.shared.enter_lease())
                .flatten();
            if let Some(entered) = &mut entered {
                // If the commit's outcome is unknown (an error, a
                // cancellation), the processor releases these.
                entered.may_write(messages.iter().map(|m| m.id));
            }
            let lease = entered.as_ref().map(LeaseAtCommit::from);
            let written_leased =
                one_statement::commit(db, table, self.pending.pop(), &mut messages, lease).await?;
            leased = entered.map(|entered| (entered, written_leased));
        } else {
            self.connection().await?;
            if let Some(txn) = self.txn.take() {
                commit_transaction(txn, self.shared.config.table(), &mut messages).await?;
            }
        }
        let ids = messages.iter().map(|m| m.id).collect();
        self.shared.committed(messages, leased).await;
        Ok(ids)
    }

    /// Rolls everything back (dropping the unit of work does the same).
    pub async fn rollback(mut self) -> Result<(), OutboxError> {
        match self.txn.take() {
            Some(txn) => Ok(txn.rollback().await?),
            None => Ok(()),
        }
    }
}

/// A unit dropped with an inbox's transaction (a handler panicked, or
/// replaced its unit) rolls it back as an inbox transaction ends; any
/// other unit's transaction rolls back as it drops.
impl Drop for UnitOfWork {
    fn drop(&mut self) {
        if self.lent
            && let Some(txn) = self.txn.take()
        {
            crate::autocommit::end_later(txn);
        }
    }
}

/// Inserts the messages in the open transaction and commits it.
async fn commit_transaction(
    txn: DatabaseTransaction,
    table: &TableName,
    messages: &mut [OutboxMessage],
) -> Result<(), OutboxError> {
    insert_messages(&txn, table, messages).await?;
    if messages.is_empty() && txn.get_database_backend() == DbBackend::Postgres {
        // PostgreSQL turns COMMIT of a transaction aborted by an earlier
        // failed statement into a silent ROLLBACK. The INSERT above would
        // have failed on such a transaction; with nothing to insert,
        // probe it, so a discarded unit of work is never reported committed.
        txn.execute_unprepared("SELECT 1").await?;
    }
    Ok(txn.commit().await?)
}
