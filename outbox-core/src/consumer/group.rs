//! [`InboxGroup`]: one database transaction in which a subscriber applies a
//! group of messages through an inbox: the inbox rows of the whole group,
//! each handler's effects, one commit.
//!
//! A subscriber whose handlers go through an inbox applies the messages
//! that are ready (several aggregates, each aggregate's in stream order) in
//! one transaction instead of one per message: one multi-row inbox insert,
//! the handlers one after another, one commit, and only then the acks. The
//! inbox makes the transaction ([`ConsumerInbox::begin_group`](super::ConsumerInbox::begin_group));
//! its handlers run in it ([`GroupedHandler`](super::GroupedHandler)), finding
//! it by its [`GroupKey`].

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};

use super::handler_error::BoxError;
use crate::id::MessageId;

/// The future the [`InboxGroup`] methods return.
pub type GroupFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send + 'a>>;

/// One message's inbox row, as a group records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEntry {
    /// The message id.
    pub message_id: MessageId,
    /// Its event name (kept with the row).
    pub event_name: String,
}

/// The name of one open [`InboxGroup`], unique in the process: what the
/// inbox's own handlers find the group's transaction by, in the inbox's
/// typed registry of open groups (see [`GroupedHandler`](super::GroupedHandler)
/// for why the transaction is not handed to them through the subscriber).
///
/// ```
/// use txoutbox_core::consumer::GroupKey;
/// assert_ne!(GroupKey::unique(), GroupKey::unique());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupKey(u64);

impl GroupKey {
    /// A key no other group of this process has had.
    pub fn unique() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// An open database transaction of an inbox in which a subscriber applies
/// a group of messages. Dropping it without [`commit`](Self::commit) rolls
/// everything back: the inbox rows and every handler's effects.
///
/// ```
/// use std::collections::HashSet;
/// use txoutbox_core::consumer::{GroupEntry, GroupFuture, GroupKey, InboxGroup};
///
/// /// Records nothing durable: every message is new.
/// struct InMemory(GroupKey, Vec<GroupEntry>);
///
/// impl InboxGroup for InMemory {
///     fn key(&self) -> GroupKey {
///         self.0
///     }
///     fn record(&mut self, entries: Vec<GroupEntry>) -> GroupFuture<'_, HashSet<txoutbox_core::MessageId>> {
///         let new = entries.iter().map(|e| e.message_id).collect();
///         self.1.extend(entries);
///         Box::pin(async move { Ok(new) })
///     }
///     fn commit(self: Box<Self>) -> GroupFuture<'static, ()> {
///         Box::pin(async { Ok(()) })
///     }
/// }
/// let group = InMemory(GroupKey::unique(), Vec::new());
/// # let _ = group;
/// ```
pub trait InboxGroup: Send {
    /// This group's key: what the inbox's handlers, given the group
    /// ([`GroupedHandler::call_in_group`](super::GroupedHandler::call_in_group)),
    /// find its transaction by.
    fn key(&self) -> GroupKey;

    /// Records `entries` (distinct ids) as processed in this transaction,
    /// without failing on the ones recorded before (by a committed
    /// transaction, or by a concurrent one that commits meanwhile); returns
    /// the ids it recorded now: the others are duplicates, whose handlers
    /// must not run.
    fn record(&mut self, entries: Vec<GroupEntry>) -> GroupFuture<'_, HashSet<MessageId>>;

    /// Commits the inbox rows and every handler's effects together.
    fn commit(self: Box<Self>) -> GroupFuture<'static, ()>;
}
