//! [`GroupedHandler`]: the protocol by which a subscriber applies a
//! handler's messages inside an inbox's group transaction ([`InboxGroup`]),
//! one at a time or several at once. It is a trait of its own, not part of
//! [`Handler`](super::Handler): a plain function has no group to run in,
//! and a subscriber asks a handler for this capability
//! ([`Handler::grouped`](super::Handler::grouped)) instead of asking it yes/no
//! questions.
//!
//! # Where the group's transaction lives
//!
//! The transaction's type is known only to the inbox that made it
//! (`txoutbox_sea_orm::Inbox`, a SeaORM `DatabaseTransaction`); the
//! subscriber (`txoutbox_nats`) sees only this crate's traits. A subscriber
//! holds two objects made apart from each other: the group, from the inbox
//! ([`ConsumerInbox::begin_group`](super::ConsumerInbox::begin_group)), and
//! each handler, from the user. Handing the group object to a handler and
//! letting the handler recover its concrete type is a downcast, which can
//! fail at run time. Letting the group call a handler typed in the
//! transaction cannot be written in this crate, which cannot name that type.
//!
//! So the transaction never travels through the subscriber. The inbox keeps
//! its open groups' transactions in a registry of its own, typed, under a
//! [`GroupKey`]; the group the subscriber holds carries the key
//! ([`InboxGroup::key`]). A handler made by the inbox
//! (`txoutbox_sea_orm::Inbox::handler`, `batch_handler`) is given the group
//! ([`call_in_group`](GroupedHandler::call_in_group)), reads its key, and
//! takes the transaction from the same registry: the transaction is typed
//! where it is made and where it is used, and the subscriber only passes a
//! key between them. The handler borrows the group mutably while it runs, so
//! the group cannot commit or roll back under it.

use std::future::Future;
use std::pin::Pin;

use super::delivery::Delivery;
use super::group::InboxGroup;
use super::handler_error::HandlerError;

/// The future a handler run inside a group returns
/// ([`GroupedHandler::call_in_group`]); it may borrow the group.
pub type GroupHandlerFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send + 'a>>;

/// A handler of `E` events that can run inside an inbox's group
/// transaction ([`InboxGroup`]): its effects commit with the group's, or
/// roll back with them. The handlers an inbox makes
/// (`txoutbox_sea_orm::Inbox::handler`, `batch_handler`) implement it and
/// offer it through [`Handler::grouped`](super::Handler::grouped); a
/// subscriber that applies in groups asks for it.
///
/// ```
/// use txoutbox_core::consumer::{GroupHandlerFuture, GroupedHandler, InboxGroup};
/// use txoutbox_core::Delivery;
///
/// /// Counts nothing durable: a sketch of the shape.
/// struct Noop;
///
/// impl GroupedHandler<u64> for Noop {
///     fn call_in_group<'a>(
///         &'a self,
///         _event: u64,
///         _delivery: Delivery,
///         group: &'a mut dyn InboxGroup,
///     ) -> GroupHandlerFuture<'a> {
///         let _key = group.key(); // where its inbox keeps the transaction
///         Box::pin(async { Ok(()) })
///     }
/// }
/// assert!(!Noop.applies_in_batches());
/// ```
pub trait GroupedHandler<E>: Send + Sync {
    /// Handles `event` inside `group`, a transaction its inbox began
    /// ([`ConsumerInbox::begin_group`](super::ConsumerInbox::begin_group)).
    fn call_in_group<'a>(
        &'a self,
        event: E,
        delivery: Delivery,
        group: &'a mut dyn InboxGroup,
    ) -> GroupHandlerFuture<'a>;

    /// Whether this handler takes several messages of a group at once
    /// ([`call_batch_in_group`](Self::call_batch_in_group)): `true` for
    /// an inbox's batch handlers (`txoutbox_sea_orm::Inbox::batch_handler`),
    /// which write a whole batch in a few set-based statements; `false` (the
    /// default) otherwise.
    fn applies_in_batches(&self) -> bool {
        false
    }

    /// Handles `batch` (messages of distinct aggregates, each aggregate at
    /// most once) inside `group`, all or nothing: on an error the group is
    /// rolled back and applied again with these messages one by one, so the
    /// failing one is found and only its aggregate pays. Called only when
    /// [`applies_in_batches`](Self::applies_in_batches) says so; the
    /// default runs [`call_in_group`](Self::call_in_group) for each
    /// message in turn.
    fn call_batch_in_group<'a>(
        &'a self,
        batch: Vec<(E, Delivery)>,
        group: &'a mut dyn InboxGroup,
    ) -> GroupHandlerFuture<'a>
    where
        E: Send + 'a,
    {
        Box::pin(async move {
            for (event, delivery) in batch {
                self.call_in_group(event, delivery, &mut *group).await?;
            }
            Ok(())
        })
    }
}
