//! [`GroupTransaction`]: the transaction in which a subscriber applies a
//! group of messages through an [`Inbox`]: their inbox rows (one multi-row
//! statement), each handler's effects in a unit of work of its own message's
//! context, one commit, once the transaction found its inbox rows still
//! there (see [`commit`](super::commit)).
//!
//! It stays in this crate, typed: the subscriber holds an
//! [`OpenGroup`](super::open_groups::OpenGroup) naming it, and the inbox's
//! handlers borrow it by that name (see [`open_groups`](super::open_groups)).

use std::collections::HashSet;

use sea_orm::{DatabaseTransaction, TransactionTrait};
use txoutbox_core::consumer::GroupEntry;
use txoutbox_core::{Delivery, HandlerError, MessageId, OutboxMessage};

use super::{Inbox, commit, sql};
use crate::autocommit;
use crate::error::OutboxError;
use crate::unit_of_work::UnitOfWork;

/// An open group transaction of one inbox.
pub(super) struct GroupTransaction {
    inbox: Inbox,
    /// `None` once a handler took it away (see [`OutboxError::GroupTransactionLost`]).
    txn: Option<DatabaseTransaction>,
    /// The inbox rows [`record`](Self::record) inserted, checked before
    /// the commit.
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

    fn txn(&self) -> Result<&DatabaseTransaction, OutboxError> {
        self.txn.as_ref().ok_or(OutboxError::GroupTransactionLost)
    }

    /// Records the inbox rows of `entries` (distinct ids) in the
    /// transaction; returns the ids it recorded now (the others are
    /// duplicates).
    pub(super) async fn record(
        &mut self,
        entries: Vec<GroupEntry>,
    ) -> Result<HashSet<MessageId>, OutboxError> {
        let rows: Vec<(MessageId, &str)> = entries
            .iter()
            .map(|entry| (entry.message_id, entry.event_name.as_str()))
            .collect();
        let new =
            sql::record_new(self.txn()?, self.inbox.table(), &self.inbox.consumer, &rows).await?;
        let duplicates = rows.len().saturating_sub(new.len());
        if duplicates > 0 {
            tracing::debug!(consumer = %self.inbox.consumer, duplicates, "inbox group: duplicates, their handlers skipped");
            self.inbox.count_many("duplicate", duplicates as u64);
        }
        self.recorded.extend(new.iter().copied());
        Ok(new)
    }

    /// Commits the inbox rows and every handler's effects together, then
    /// announces the messages the handlers recorded.
    pub(super) async fn commit(mut self) -> Result<(), OutboxError> {
        let txn = self.txn.take().ok_or(OutboxError::GroupTransactionLost)?;
        commit::commit(&self.inbox, txn, &self.recorded).await?;
        self.inbox.count_many("applied", self.applied);
        let written = std::mem::take(&mut self.written);
        self.inbox.outbox.committed_elsewhere(written).await;
        Ok(())
    }

    /// A unit of work in the group's transaction (lent to it until
    /// [`take_back`](Self::take_back)), stamped with `delivery`'s
    /// [caused context](Delivery::caused_context): what a handler writes and
    /// the events it records are the group's, stamped with this message's
    /// correlation and causation.
    pub(super) fn unit(&mut self, delivery: &Delivery) -> Result<UnitOfWork, OutboxError> {
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
    pub(super) async fn take_back(
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
