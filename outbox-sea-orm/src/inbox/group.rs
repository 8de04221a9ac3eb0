//! [`GroupTransaction`]: the transaction in which a subscriber applies a
//! group of messages through an [`Inbox`]: their inbox rows (one multi-row
//! statement), each handler's effects in a unit of work of its own message's
//! context, one commit, once the transaction found its inbox rows still
//! there (see [`commit`](super::commit)).

use std::any::Any;
use std::collections::HashSet;

use sea_orm::{DatabaseTransaction, TransactionTrait};
use txoutbox_core::consumer::{GroupEntry, GroupFuture, InboxGroup};
use txoutbox_core::{Delivery, HandlerError, MessageId, OutboxMessage};

use super::batch::{Batched, InboxBatchHandler};
use super::handler::InboxHandler;
use super::{Inbox, commit, sql};
use crate::autocommit;
use crate::error::OutboxError;
use crate::unit_of_work::UnitOfWork;

/// An open group transaction of one inbox (see
/// [`ConsumerInbox::begin_group`](txoutbox_core::consumer::ConsumerInbox::begin_group)).
pub(super) struct GroupTransaction {
    inbox: Inbox,
    /// `None` once a handler took it away (see [`OutboxError::GroupTransactionLost`]).
    txn: Option<DatabaseTransaction>,
    /// The inbox rows [`record`](InboxGroup::record) inserted, checked
    /// before the commit.
    recorded: Vec<MessageId>,
    /// The messages the handlers recorded, to announce after the commit.
    written: Vec<OutboxMessage>,
    /// Handlers applied.
    applied: u64,
}

impl GroupTransaction {
    /// Begins the group's transaction.
    pub(super) async fn begin(inbox: Inbox) -> Result<Self, OutboxError> {
        let txn = inbox.outbox.db().begin().await?;
        let prepared = async {
            autocommit::turn_off(&txn).await?;
            match inbox.idle_limit() {
                Some(limit) => sql::limit_idle(&txn, limit).await,
                None => Ok(()),
            }
        }
        .await;
        if let Err(err) = prepared {
            commit::discard(txn).await;
            return Err(err.into());
        }
        Ok(Self {
            inbox,
            txn: Some(txn),
            recorded: Vec::new(),
            written: Vec::new(),
            applied: 0,
        })
    }

    /// `group` as the group transaction of `inbox`'s handlers; an error if
    /// it is another's (a subscriber bug: nothing is applied).
    pub(super) fn of<'g>(
        inbox: &Inbox,
        group: &'g mut dyn InboxGroup,
    ) -> Result<&'g mut Self, HandlerError> {
        group.as_any_mut().downcast_mut::<Self>().ok_or_else(|| {
            HandlerError::retry(ForeignGroup {
                consumer: inbox.consumer().to_owned(),
            })
        })
    }

    fn txn(&self) -> Result<&DatabaseTransaction, OutboxError> {
        self.txn.as_ref().ok_or(OutboxError::GroupTransactionLost)
    }

    /// Runs `handler` for one message of the group with a unit of work in
    /// the group's transaction, begun with the message's
    /// [caused context](Delivery::caused_context): what it writes and the
    /// events it records are the group's, stamped with this message's
    /// correlation and causation.
    pub(super) async fn apply<E, H: InboxHandler<E>>(
        &mut self,
        event: E,
        delivery: Delivery,
        handler: &H,
    ) -> Result<(), HandlerError> {
        let mut uow = self.unit(&delivery)?;
        let handled = handler.handle(event, delivery, &mut uow).await;
        self.take_back(uow, handled, 1).await
    }

    /// Runs `handler` for a batch of the group's messages (not empty) with
    /// one unit of work in the group's transaction, begun with the first
    /// message's caused context.
    pub(super) async fn apply_batch<E, H: InboxBatchHandler<E>>(
        &mut self,
        batch: Vec<Batched<E>>,
        handler: &H,
    ) -> Result<(), HandlerError> {
        let Some(first) = batch.first() else {
            return Ok(());
        };
        let mut uow = self.unit(&first.delivery)?;
        let messages = batch.len() as u64;
        let handled = handler.handle_batch(batch, &mut uow).await;
        self.take_back(uow, handled, messages).await
    }

    /// A unit of work in the group's transaction (lent to it until
    /// [`take_back`](Self::take_back)), stamped with `delivery`'s caused
    /// context.
    fn unit(&mut self, delivery: &Delivery) -> Result<UnitOfWork, OutboxError> {
        let txn = self.txn.take().ok_or(OutboxError::GroupTransactionLost)?;
        Ok(self
            .inbox
            .outbox
            .begin_within(delivery.caused_context(), txn))
    }

    /// Takes the transaction back from `uow`, writing the events it
    /// recorded, after its handler `handled` `messages` messages. A unit
    /// that [saw a retryable failure](UnitOfWork::saw_retryable_failure)
    /// fails the group, even if its handler returned `Ok`
    /// ([`OutboxError::RetryableFailureSwallowed`]).
    async fn take_back(
        &mut self,
        uow: UnitOfWork,
        handled: Result<(), HandlerError>,
        messages: u64,
    ) -> Result<(), HandlerError> {
        let swallowed = uow.saw_retryable_failure();
        let (txn, written) = uow.give_back().await;
        self.txn = txn;
        handled?;
        if swallowed {
            return Err(OutboxError::RetryableFailureSwallowed.into());
        }
        self.written.extend(written?);
        self.applied += messages;
        Ok(())
    }
}

/// A group dropped before its commit (a handler failed, the subscriber
/// stopped) is rolled back.
impl Drop for GroupTransaction {
    fn drop(&mut self) {
        if let Some(txn) = self.txn.take() {
            autocommit::end_later(txn);
        }
    }
}

/// A group transaction that is not an inbox's was handed to an inbox
/// handler (a subscriber bug): nothing is applied.
#[derive(Debug, thiserror::Error)]
#[error("the handler of inbox `{consumer}` was given a group transaction that is not an inbox's")]
struct ForeignGroup {
    consumer: String,
}

impl InboxGroup for GroupTransaction {
    fn record(&mut self, entries: Vec<GroupEntry>) -> GroupFuture<'_, HashSet<MessageId>> {
        Box::pin(async move {
            let rows: Vec<(MessageId, &str)> = entries
                .iter()
                .map(|entry| (entry.message_id, entry.event_name.as_str()))
                .collect();
            let new = sql::record_new(self.txn()?, self.inbox.table(), &self.inbox.consumer, &rows)
                .await
                .map_err(OutboxError::from)?;
            let duplicates = rows.len().saturating_sub(new.len());
            if duplicates > 0 {
                tracing::debug!(consumer = %self.inbox.consumer, duplicates, "inbox group: duplicates, their handlers skipped");
                self.inbox.count_many("duplicate", duplicates as u64);
            }
            self.recorded.extend(new.iter().copied());
            Ok(new)
        })
    }

    fn commit(mut self: Box<Self>) -> GroupFuture<'static, ()> {
        Box::pin(async move {
            let txn = self.txn.take().ok_or(OutboxError::GroupTransactionLost)?;
            commit::commit(&self.inbox, txn, &self.recorded).await?;
            self.inbox.count_many("applied", self.applied);
            let written = std::mem::take(&mut self.written);
            self.inbox.outbox.committed_elsewhere(written).await;
            Ok(())
        })
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
