//! [`Handler`]: what a typed subscriber runs for each event of one type.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::delivery::Delivery;
use super::group::{GroupHandlerFuture, InboxGroup};
use super::handler_error::HandlerError;
use super::inbox::ConsumerInbox;

/// The future a [`Handler`] returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send + 'static>>;

/// A handler of `E` events, as a typed subscriber
/// (`txoutbox_nats::SubscriberBuilder::on`) takes it.
///
/// Two kinds implement it:
///
/// - every function or closure `Fn(E, Delivery) -> impl Future<Output =
///   Result<(), HandlerError>>`: its effects happen *at least once* (a
///   redelivery runs it again);
/// - the handlers an inbox makes (`txoutbox_sea_orm::Inbox::handler`): each
///   runs in a transaction with the inbox row, so its effects happen *once*,
///   and it names its inbox ([`inbox`](Handler::inbox)), through which the
///   subscriber also keeps each aggregate's messages in order across its
///   restarts and behind a message it could not apply.
///
/// A closure's arguments need their types (`|event: OrderPlaced, delivery:
/// Delivery| ...`, or `_: Delivery`): the subscriber learns the event type
/// from them.
///
/// ```
/// use txoutbox_core::consumer::Handler;
/// use txoutbox_core::{Delivery, HandlerError};
///
/// async fn on_number(n: u64, _: Delivery) -> Result<(), HandlerError> {
///     if n == 0 { return Err(HandlerError::permanent("zero")); }
///     Ok(())
/// }
/// fn takes<E, H: Handler<E>>(handler: H) -> bool { handler.inbox().is_none() }
/// assert!(takes(on_number));
/// ```
pub trait Handler<E>: Send + Sync + 'static {
    /// Handles `event`, delivered as `delivery`.
    fn call(&self, event: E, delivery: Delivery) -> HandlerFuture;

    /// The inbox this handler applies its effects through, if any (`None`
    /// for a plain function: effects at least once).
    fn inbox(&self) -> Option<Arc<dyn ConsumerInbox>> {
        None
    }

    /// Whether the subscriber may apply this handler's messages inside a
    /// group transaction of its inbox ([`call_in_group`](Handler::call_in_group)):
    /// `true` for an inbox's handlers unless they asked for a transaction of
    /// their own; `false` (the default) for every other handler.
    fn applies_in_group(&self) -> bool {
        false
    }

    /// Handles `event` inside `group`, a transaction its inbox began
    /// ([`ConsumerInbox::begin_group`]): its effects commit with the
    /// group's, or roll back with them. Called only when
    /// [`applies_in_group`](Handler::applies_in_group) says so; the default
    /// runs [`call`](Handler::call), outside the group.
    fn call_in_group<'a>(
        &'a self,
        event: E,
        delivery: Delivery,
        group: &'a mut dyn InboxGroup,
    ) -> GroupHandlerFuture<'a> {
        let _ = group;
        self.call(event, delivery)
    }

    /// Whether this handler takes several messages of a group at once
    /// ([`call_batch_in_group`](Handler::call_batch_in_group)): `true` for
    /// an inbox's batch handlers (`txoutbox_sea_orm::Inbox::batch_handler`),
    /// which write a whole batch in a few set-based statements; `false` (the
    /// default) for every other handler.
    fn applies_in_batches(&self) -> bool {
        false
    }

    /// Handles `batch` (messages of distinct aggregates, each aggregate at
    /// most once) inside `group`, all or nothing: on an error the group is
    /// rolled back and applied again with these messages one by one, so the
    /// failing one is found and only its aggregate pays. Called only when
    /// [`applies_in_batches`](Handler::applies_in_batches) says so; the
    /// default runs [`call_in_group`](Handler::call_in_group) for each
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

impl<E, F, Fut> Handler<E> for F
where
    F: Fn(E, Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
{
    fn call(&self, event: E, delivery: Delivery) -> HandlerFuture {
        Box::pin(self(event, delivery))
    }
}
