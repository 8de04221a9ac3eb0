//! The outbox table as an operator sees it: [`OutboxAdmin`], the calls the
//! processor never makes (requeue and skip dead messages), with their
//! arguments. Purging published rows is the processor's too (its cleanup):
//! [`OutboxStore::purge_published`](super::OutboxStore::purge_published).

use std::future::Future;

use crate::id::MessageId;

use super::StoreError;

/// Which dead messages to put back to pending.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadSelector {
    /// These messages.
    Ids(Vec<MessageId>),
    /// Every dead message of this event name.
    EventName(String),
    /// Every dead message.
    All,
}

/// Who skips a dead message and why ([`OutboxAdmin::skip_dead`]): kept on
/// the row with the time, so the decision can be traced later.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkipNote {
    /// Who decided (an operator's name, `user@host`).
    pub by: String,
    /// Why, if given.
    pub reason: Option<String>,
}

impl SkipNote {
    /// A skip decided by `by`, with no reason given.
    pub fn by(by: impl Into<String>) -> Self {
        Self {
            by: by.into(),
            reason: None,
        }
    }

    /// The same with `reason`.
    #[must_use]
    pub fn because(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }
}

/// The outbox table as an operator sees it: the calls the processor never
/// makes (the `outbox` command's `dead requeue` and `dead skip`; its
/// `purge` deletes through
/// [`OutboxStore::purge_published`](super::OutboxStore::purge_published),
/// which the processor's cleanup calls too).
///
/// Implemented by the same stores as [`OutboxStore`](super::OutboxStore)
/// (`outbox-sea-orm`'s store, the testing kit's memory store); a processor
/// needs only `OutboxStore`.
pub trait OutboxAdmin: Send + Sync {
    /// Puts dead messages back to pending, due now, with no attempts spent
    /// and no abandoned claims counted (a message sent dead as a suspected
    /// killer is published again, not sent dead at its next claim).
    fn requeue_dead(
        &self,
        selector: DeadSelector,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Marks the dead message `id` as deliberately not published: it is kept
    /// (with `note` and the time) but settled, so it no longer holds back its
    /// aggregate: the next claims publish the messages behind it, in order.
    /// Skipped messages are purged with published ones. Returns whether
    /// `id` was dead (and is now skipped); a message that is not dead, or
    /// does not exist, is left alone.
    fn skip_dead(
        &self,
        id: MessageId,
        note: &SkipNote,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
}
