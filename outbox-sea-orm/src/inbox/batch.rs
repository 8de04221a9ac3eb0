//! Inbox batch handlers: [`InboxBatchHandler`], which applies several
//! messages of one event type at once (one set-based statement for all of
//! them), and [`BatchThroughInbox`], the subscriber handler
//! [`Inbox::batch_handler`](super::Inbox::batch_handler) makes of one.

use std::future::Future;
use std::sync::Arc;

use txoutbox_core::consumer::{
    ConsumerInbox, GroupHandlerFuture, GroupedHandler, Handler, HandlerFuture, InboxGroup,
};
use txoutbox_core::{Delivery, HandlerError};

use super::open_groups::Lent;
use super::{Inbox, Processed};
use crate::unit_of_work::UnitOfWork;

/// One message of a batch: its event and how it was delivered.
#[derive(Debug, Clone)]
pub struct Batched<E> {
    /// The decoded event.
    pub event: E,
    /// Its delivery (message id, aggregate, context).
    pub delivery: Delivery,
}

/// A handler of `E` events that applies several messages at once in one
/// [`UnitOfWork`], typically with one set-based statement (an `UPDATE ...
/// FROM (VALUES ...)`, an `INSERT` of many rows) instead of one statement
/// per message: what makes a consumer with a realistic write as fast as
/// its producer.
///
/// What a batch holds, when the subscriber applies in groups (its
/// default; `SubscriberBuilder::inbox_per_message` in `txoutbox_nats`
/// turns them off): messages of
/// **distinct aggregates**, each aggregate at most once, each one new (its
/// inbox row recorded in the same transaction); an aggregate's next
/// message comes in a later batch, after this one ran. So a statement
/// keyed by aggregate never sees the same key twice. A message delivered
/// again, or applied without groups, comes in a batch of one.
///
/// A batch is all or nothing: when the handler fails, the group's
/// transaction is rolled back and applied again with the batch's messages
/// one by one (a batch of one each), so the failing message is found and
/// follows the usual rules (retry, dead letter, hold) while every other
/// aggregate's effects commit once.
///
/// The unit of work is stamped with the first message's
/// [caused context](Delivery::caused_context); a handler that records
/// events calls [`UnitOfWork::set_context`] with each message's before it
/// records the events that message causes.
///
/// A plain `async fn(Vec<Batched<E>>, &mut UnitOfWork) -> Result<(),
/// HandlerError>` needs no type: [`Inbox::batch_handler`](super::Inbox::batch_handler)
/// takes it as it is. A handler with state implements this trait:
///
/// ```
/// # use txoutbox_core::IntegrationEvent;
/// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
/// # #[event(name = "stock.counted")] struct StockCounted { sku: String, on_hand: i64 }
/// use sea_orm::ConnectionTrait;
/// use sea_orm::sea_query::{OnConflict, Query};
/// use txoutbox_core::HandlerError;
/// use txoutbox_sea_orm::UnitOfWork;
/// use txoutbox_sea_orm::inbox::{Batched, InboxBatchHandler};
///
/// struct StockView { table: String }
///
/// impl InboxBatchHandler<StockCounted> for StockView {
///     async fn handle_batch(&self, batch: Vec<Batched<StockCounted>>, uow: &mut UnitOfWork) -> Result<(), HandlerError> {
///         // One statement for the whole batch: each sku at most once in it.
///         let mut upsert = Query::insert();
///         upsert.into_table(self.table.clone()).columns(["sku", "on_hand"]);
///         for counted in batch {
///             upsert.values([counted.event.sku.into(), counted.event.on_hand.into()])?;
///         }
///         upsert.on_conflict(OnConflict::column("sku").update_column("on_hand").to_owned());
///         uow.connection().await?.execute(&upsert).await?;
///         Ok(())
///     }
/// }
/// ```
pub trait InboxBatchHandler<E>: Send + Sync + 'static {
    /// Applies the effects of every message of `batch` through `uow`. An
    /// error rolls them back (see the trait's documentation for what
    /// follows).
    fn handle_batch<'a>(
        &'a self,
        batch: Vec<Batched<E>>,
        uow: &'a mut UnitOfWork,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send + 'a;
}

/// A function usable as an [`InboxBatchHandler`]: any
/// `async fn(Vec<Batched<E>>, &mut UnitOfWork) -> Result<(), HandlerError>`
/// (it names the future such a function returns for each borrow of the
/// unit of work). Implemented for every such function; never by hand.
pub trait InboxBatchFn<'a, E>: Send + Sync + 'static {
    /// The future the function returns.
    type Future: Future<Output = Result<(), HandlerError>> + Send + 'a;

    /// Calls the function.
    fn call(&self, batch: Vec<Batched<E>>, uow: &'a mut UnitOfWork) -> Self::Future;
}

impl<'a, E, F, Fut> InboxBatchFn<'a, E> for F
where
    F: Fn(Vec<Batched<E>>, &'a mut UnitOfWork) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'a,
{
    type Future = Fut;

    fn call(&self, batch: Vec<Batched<E>>, uow: &'a mut UnitOfWork) -> Fut {
        self(batch, uow)
    }
}

/// A function as an [`InboxBatchHandler`]: what
/// [`Inbox::batch_handler`](super::Inbox::batch_handler) wraps a plain
/// `async fn` in.
#[derive(Debug, Clone)]
pub struct FnBatchHandler<F>(pub(super) F);

impl<E, F> InboxBatchHandler<E> for FnBatchHandler<F>
where
    F: for<'a> InboxBatchFn<'a, E>,
{
    fn handle_batch<'a>(
        &'a self,
        batch: Vec<Batched<E>>,
        uow: &'a mut UnitOfWork,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send + 'a {
        self.0.call(batch, uow)
    }
}

/// A subscriber handler that applies `H`'s effects through an inbox, a
/// batch of messages at once when the subscriber applies in groups (see
/// [`InboxBatchHandler`]) and a batch of one otherwise: made by
/// [`Inbox::batch_handler`](super::Inbox::batch_handler), given to a typed
/// subscriber's `on`. Exactly once and in order as
/// [`ThroughInbox`](super::ThroughInbox).
pub struct BatchThroughInbox<H> {
    inbox: Inbox,
    handler: Arc<H>,
}

impl<H> BatchThroughInbox<H> {
    pub(super) fn new(inbox: Inbox, handler: H) -> Self {
        Self {
            inbox,
            handler: Arc::new(handler),
        }
    }

    /// The inbox it applies through.
    pub fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    /// Processes `event` through the inbox as the subscriber does outside
    /// groups (a batch of one, with its inbox row, in one transaction), or
    /// nothing for a message processed before.
    pub async fn apply<E>(&self, event: E, delivery: Delivery) -> Result<Processed, HandlerError>
    where
        E: Send + 'static,
        H: InboxBatchHandler<E>,
    {
        let id = delivery.message_id();
        let Some(mut uow) = self.inbox.open(&delivery).await? else {
            return Ok(Processed::Duplicate);
        };
        let handled = self
            .handler
            .handle_batch(vec![Batched { event, delivery }], &mut uow)
            .await;
        self.inbox.close(uow, id, handled).await
    }
}

impl<H> Clone for BatchThroughInbox<H> {
    fn clone(&self) -> Self {
        Self {
            inbox: self.inbox.clone(),
            handler: Arc::clone(&self.handler),
        }
    }
}

impl<H> std::fmt::Debug for BatchThroughInbox<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchThroughInbox")
            .field("consumer", &self.inbox.consumer())
            .finish_non_exhaustive()
    }
}

impl<E, H> Handler<E> for BatchThroughInbox<H>
where
    E: Send + 'static,
    H: InboxBatchHandler<E>,
{
    fn call(&self, event: E, delivery: Delivery) -> HandlerFuture {
        let this = self.clone();
        Box::pin(async move { this.apply(event, delivery).await.map(|_| ()) })
    }

    fn inbox(&self) -> Option<Arc<dyn ConsumerInbox>> {
        Some(Arc::new(self.inbox.clone()))
    }

    fn grouped(&self) -> Option<&dyn GroupedHandler<E>> {
        Some(self)
    }
}

/// Runs `H` on a batch of a group's messages with one unit of work in the
/// group's transaction (borrowed from the inbox by the group's
/// [`GroupKey`](txoutbox_core::consumer::GroupKey)), begun with the first
/// message's caused context.
impl<E, H> GroupedHandler<E> for BatchThroughInbox<H>
where
    E: Send + 'static,
    H: InboxBatchHandler<E>,
{
    fn call_in_group<'a>(
        &'a self,
        event: E,
        delivery: Delivery,
        group: &'a mut dyn InboxGroup,
    ) -> GroupHandlerFuture<'a> {
        self.call_batch_in_group(vec![(event, delivery)], group)
    }

    fn applies_in_batches(&self) -> bool {
        true
    }

    fn call_batch_in_group<'a>(
        &'a self,
        batch: Vec<(E, Delivery)>,
        group: &'a mut dyn InboxGroup,
    ) -> GroupHandlerFuture<'a>
    where
        E: Send + 'a,
    {
        Box::pin(async move {
            let mut group = Lent::of(group)?;
            let batch: Vec<Batched<E>> = batch
                .into_iter()
                .map(|(event, delivery)| Batched { event, delivery })
                .collect();
            let Some(first) = batch.first() else {
                return Ok(());
            };
            let mut uow = group.unit(&first.delivery)?;
            let messages = batch.len() as u64;
            let handled = self.handler.handle_batch(batch, &mut uow).await;
            group.take_back(uow, handled, messages).await
        })
    }
}
