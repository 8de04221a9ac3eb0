//! [`InboxHandler`]: what an [`Inbox`](super::Inbox) runs for a message, in
//! the message's unit of work.

use std::future::Future;

use txoutbox_core::{Delivery, HandlerError};

use crate::unit_of_work::UnitOfWork;

/// A handler of `E` events that applies its effects in the message's
/// [`UnitOfWork`] (committed with the inbox row).
///
/// Hand one to [`Inbox::handler_with`](super::Inbox::handler_with). A plain
/// `async fn(E, Delivery, &mut UnitOfWork) -> Result<(), HandlerError>`
/// needs no type: [`Inbox::handler`](super::Inbox::handler) takes it as it
/// is. A handler with state implements this trait on its own type:
///
/// ```
/// # use txoutbox_core::IntegrationEvent;
/// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
/// # #[event(name = "order.shipped")] struct OrderShipped { order_id: String }
/// use txoutbox_core::{Delivery, HandlerError};
/// use txoutbox_sea_orm::UnitOfWork;
/// use txoutbox_sea_orm::inbox::InboxHandler;
/// use sea_orm::ConnectionTrait;
/// use sea_orm::sea_query::Query;
///
/// struct Shipments { table: String }
///
/// impl InboxHandler<OrderShipped> for Shipments {
///     async fn handle(&self, event: OrderShipped, _: Delivery, uow: &mut UnitOfWork) -> Result<(), HandlerError> {
///         let insert = Query::insert()
///             .into_table(self.table.clone()) // an identifier, quoted
///             .columns(["order_id"])
///             .values([event.order_id.into()])? // a value, bound as a parameter
///             .to_owned();
///         uow.connection().await?.execute(&insert).await?;
///         Ok(())
///     }
/// }
/// ```
pub trait InboxHandler<E>: Send + Sync + 'static {
    /// Applies `event`'s effects through `uow`. An error rolls them back
    /// and the message is delivered again (or dead-lettered, see
    /// [`HandlerError`]).
    fn handle<'a>(
        &'a self,
        event: E,
        delivery: Delivery,
        uow: &'a mut UnitOfWork,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send + 'a;
}

/// A function usable as an [`InboxHandler`]: any
/// `async fn(E, Delivery, &mut UnitOfWork) -> Result<(), HandlerError>`
/// (it names the future such a function returns for each borrow of the
/// unit of work). Implemented for every such function; never by hand.
pub trait InboxFn<'a, E>: Send + Sync + 'static {
    /// The future the function returns.
    type Future: Future<Output = Result<(), HandlerError>> + Send + 'a;

    /// Calls the function.
    fn call(&self, event: E, delivery: Delivery, uow: &'a mut UnitOfWork) -> Self::Future;
}

impl<'a, E, F, Fut> InboxFn<'a, E> for F
where
    F: Fn(E, Delivery, &'a mut UnitOfWork) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'a,
{
    type Future = Fut;

    fn call(&self, event: E, delivery: Delivery, uow: &'a mut UnitOfWork) -> Fut {
        self(event, delivery, uow)
    }
}

/// A function as an [`InboxHandler`]: what [`Inbox::handler`](super::Inbox::handler)
/// wraps a plain `async fn` in.
#[derive(Debug, Clone)]
pub struct FnHandler<F>(pub(super) F);

impl<E, F> InboxHandler<E> for FnHandler<F>
where
    F: for<'a> InboxFn<'a, E>,
{
    fn handle<'a>(
        &'a self,
        event: E,
        delivery: Delivery,
        uow: &'a mut UnitOfWork,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send + 'a {
        self.0.call(event, delivery, uow)
    }
}
