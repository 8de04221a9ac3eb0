//! [`Handler`]: what a typed subscriber runs for each event of one type.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::delivery::Delivery;
use super::grouped::GroupedHandler;
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
///   restarts and behind a message it could not apply, and offers the
///   inbox's group protocol ([`grouped`](Handler::grouped)).
///
/// `call` is the one method to write; the other two are capabilities a
/// subscriber asks for, `None` unless a handler has them.
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
/// fn takes<E, H: Handler<E>>(handler: H) -> bool { handler.inbox().is_none() && handler.grouped().is_none() }
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

    /// The inbox group protocol of this handler, if it can run inside an
    /// inbox's group transaction ([`GroupedHandler`]): `Some` for an
    /// inbox's handlers unless they asked for a transaction of their own;
    /// `None` (the default) for every other handler, which a subscriber
    /// then runs on its own ([`call`](Handler::call)).
    fn grouped(&self) -> Option<&dyn GroupedHandler<E>> {
        None
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
