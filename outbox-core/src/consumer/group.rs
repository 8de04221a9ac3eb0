//! [`InboxGroup`]: one database transaction in which a subscriber applies a
//! group of messages through an inbox: the inbox rows of the whole group,
//! each handler's effects, one commit.
//!
//! A subscriber whose handlers go through an inbox applies the messages
//! that are ready (several aggregates, each aggregate's in stream order) in
//! one transaction instead of one per message: one multi-row inbox insert,
//! the handlers one after another, one commit, and only then the acks. The
//! inbox makes the transaction ([`ConsumerInbox::begin_group`](super::ConsumerInbox::begin_group));
//! its handlers run in it ([`Handler::call_in_group`](super::Handler::call_in_group)).

use std::any::Any;
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;

use super::handler_error::{BoxError, HandlerError};
use crate::id::MessageId;

/// The future the [`InboxGroup`] methods return.
pub type GroupFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send + 'a>>;

/// The future a handler run inside a group returns
/// ([`Handler::call_in_group`](super::Handler::call_in_group)); it may
/// borrow the group.
pub type GroupHandlerFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send + 'a>>;

/// One message's inbox row, as a group records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEntry {
    /// The message id.
    pub message_id: MessageId,
    /// Its event name (kept with the row).
    pub event_name: String,
}

/// An open database transaction of an inbox in which a subscriber applies
/// a group of messages. Dropping it without [`commit`](Self::commit) rolls
/// everything back: the inbox rows and every handler's effects.
///
/// ```
/// use std::any::Any;
/// use std::collections::HashSet;
/// use txoutbox_core::consumer::{GroupEntry, GroupFuture, InboxGroup};
///
/// /// Records nothing durable: every message is new.
/// struct InMemory(Vec<GroupEntry>);
///
/// impl InboxGroup for InMemory {
///     fn record(&mut self, entries: Vec<GroupEntry>) -> GroupFuture<'_, HashSet<txoutbox_core::MessageId>> {
///         let new = entries.iter().map(|e| e.message_id).collect();
///         self.0.extend(entries);
///         Box::pin(async move { Ok(new) })
///     }
///     fn commit(self: Box<Self>) -> GroupFuture<'static, ()> {
///         Box::pin(async { Ok(()) })
///     }
///     fn as_any_mut(&mut self) -> &mut dyn Any {
///         self
///     }
/// }
/// ```
pub trait InboxGroup: Any + Send {
    /// Records `entries` (distinct ids) as processed in this transaction,
    /// without failing on the ones recorded before (by a committed
    /// transaction, or by a concurrent one that commits meanwhile); returns
    /// the ids it recorded now: the others are duplicates, whose handlers
    /// must not run.
    fn record(&mut self, entries: Vec<GroupEntry>) -> GroupFuture<'_, HashSet<MessageId>>;

    /// Commits the inbox rows and every handler's effects together.
    fn commit(self: Box<Self>) -> GroupFuture<'static, ()>;

    /// Itself, for the inbox's own handlers to find their transaction in
    /// (they downcast it to the inbox's type).
    fn as_any_mut(&mut self) -> &mut dyn Any;
}
