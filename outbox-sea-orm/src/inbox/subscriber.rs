//! The inbox as a typed subscriber uses it: [`ThroughInbox`], the handler
//! [`Inbox::handler`] makes, and [`ConsumerInbox`] for [`Inbox`].

use std::sync::Arc;
use std::time::Duration;

use sea_orm::DbErr;
use txoutbox_core::consumer::{
    ConsumerInbox, FailureCause, GroupFuture, GroupHandlerFuture, GroupedHandler, Handler,
    HandlerFuture, HeldFuture, InboxGroup, ReaderLease,
};
use txoutbox_core::{Delivery, HandlerError};

use super::handler::InboxHandler;
use super::lease_sql;
use super::open_groups::{Lent, OpenGroup};
use super::{Inbox, Processed};
use crate::error::OutboxError;
use crate::schema::lease_table;

/// A subscriber handler that applies `H`'s effects through an inbox, in
/// one transaction with the inbox row: made by [`Inbox::handler`] (and its
/// `_with`/`_boxed` variants), given to a typed subscriber's `on`. It names
/// its inbox, so the subscriber also keeps each aggregate's messages in
/// order with it ([`Handler::inbox`]), and applies them in its groups
/// ([`Handler::grouped`]).
///
/// A subscriber that applies inbox handlers in groups
/// (`SubscriberBuilder::inbox_groups` in `txoutbox_nats`) runs it in a transaction
/// shared with other messages: its unit of work is still its own message's
/// (the events it records carry that message's correlation and causation),
/// but its effects commit with the group's, and a failure elsewhere in the
/// group rolls them back and runs it again. A handler with effects outside
/// the database (a call to another service, an e-mail) asks for a
/// transaction of its own with [`own_transaction`](Self::own_transaction).
/// In a group it still runs once per message, each statement a round trip:
/// a handler that writes a row per message writes a whole batch in one
/// statement as a batch handler ([`Inbox::batch_handler`]).
///
/// A test can run it as the subscriber does, with [`apply`](Self::apply),
/// which tells a duplicate from an application.
pub struct ThroughInbox<H> {
    inbox: Inbox,
    handler: Arc<H>,
    own_transaction: bool,
}

impl<H> ThroughInbox<H> {
    pub(super) fn new(inbox: Inbox, handler: H) -> Self {
        Self {
            inbox,
            handler: Arc::new(handler),
            own_transaction: false,
        }
    }

    /// Applies each of this handler's messages in a transaction of its own
    /// (inbox row, effects, commit), never in a group with other messages:
    /// for a handler that is not safe to run again after its group rolled
    /// back (it calls another service, sends an e-mail). Order and
    /// exactly-once are the same; such messages cost a commit each.
    ///
    /// ```no_run
    /// # use txoutbox_core::IntegrationEvent;
    /// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
    /// # #[event(name = "order.paid")] struct OrderPaid { order_id: String }
    /// use txoutbox_core::{Delivery, HandlerError};
    /// use txoutbox_sea_orm::{Inbox, UnitOfWork};
    ///
    /// async fn send_receipt(_: OrderPaid, _: Delivery, _: &mut UnitOfWork) -> Result<(), HandlerError> {
    ///     Ok(()) // calls the mail service
    /// }
    /// # fn run(inbox: Inbox) {
    /// let send_receipt = inbox.handler(send_receipt).own_transaction();
    /// # let _ = send_receipt; }
    /// ```
    pub fn own_transaction(mut self) -> Self {
        self.own_transaction = true;
        self
    }

    /// Whether it asked for a transaction of its own
    /// ([`own_transaction`](Self::own_transaction)).
    pub fn has_own_transaction(&self) -> bool {
        self.own_transaction
    }

    /// The inbox it applies through.
    pub fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    /// Processes `event` through the inbox as the subscriber would
    /// ([`Inbox::process_with`]): its effects and the inbox row in one
    /// transaction, or nothing for a message processed before.
    ///
    /// ```no_run
    /// # use txoutbox_core::IntegrationEvent;
    /// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
    /// # #[event(name = "order.paid")] struct OrderPaid { order_id: String }
    /// # async fn run(inbox: txoutbox_sea_orm::Inbox, delivery: txoutbox_core::Delivery) -> Result<(), Box<dyn std::error::Error>> {
    /// use txoutbox_core::{Delivery, HandlerError};
    /// use txoutbox_sea_orm::UnitOfWork;
    /// use txoutbox_sea_orm::inbox::Processed;
    ///
    /// async fn on_paid(_: OrderPaid, _: Delivery, _: &mut UnitOfWork) -> Result<(), HandlerError> {
    ///     Ok(())
    /// }
    /// let on_paid = inbox.handler(on_paid);
    /// let paid = OrderPaid { order_id: "o-1".into() };
    /// assert_eq!(on_paid.apply(paid, delivery.clone()).await?, Processed::Applied);
    /// # Ok(()) }
    /// ```
    pub async fn apply<E>(&self, event: E, delivery: Delivery) -> Result<Processed, HandlerError>
    where
        E: Send + 'static,
        H: InboxHandler<E>,
    {
        self.inbox
            .process_with(event, delivery, &*self.handler)
            .await
    }
}

impl<H> Clone for ThroughInbox<H> {
    fn clone(&self) -> Self {
        Self {
            inbox: self.inbox.clone(),
            handler: Arc::clone(&self.handler),
            own_transaction: self.own_transaction,
        }
    }
}

impl<H> std::fmt::Debug for ThroughInbox<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThroughInbox")
            .field("consumer", &self.inbox.consumer())
            .field("own_transaction", &self.own_transaction)
            .finish_non_exhaustive()
    }
}

impl<E, H> Handler<E> for ThroughInbox<H>
where
    E: Send + 'static,
    H: InboxHandler<E>,
{
    fn call(&self, event: E, delivery: Delivery) -> HandlerFuture {
        let (inbox, handler) = (self.inbox.clone(), Arc::clone(&self.handler));
        Box::pin(async move {
            inbox
                .process_with(event, delivery, &*handler)
                .await
                .map(|_| ())
        })
    }

    fn inbox(&self) -> Option<Arc<dyn ConsumerInbox>> {
        Some(Arc::new(self.inbox.clone()))
    }

    fn grouped(&self) -> Option<&dyn GroupedHandler<E>> {
        (!self.own_transaction).then_some(self as &dyn GroupedHandler<E>)
    }
}

/// Runs `H` in a group's transaction (borrowed from the inbox by the
/// group's [`GroupKey`](txoutbox_core::consumer::GroupKey)), with a unit of work of the message's own
/// [caused context](Delivery::caused_context): what it writes and the
/// events it records are the group's, stamped with this message's
/// correlation and causation.
impl<E, H> GroupedHandler<E> for ThroughInbox<H>
where
    E: Send + 'static,
    H: InboxHandler<E>,
{
    fn call_in_group<'a>(
        &'a self,
        event: E,
        delivery: Delivery,
        group: &'a mut dyn InboxGroup,
    ) -> GroupHandlerFuture<'a> {
        Box::pin(async move {
            let mut group = Lent::of(group)?;
            let mut uow = group.unit(&delivery)?;
            let handled = self.handler.handle(event, delivery, &mut uow).await;
            group.take_back(uow, handled, 1).await
        })
    }
}

/// What a typed subscriber needs of its inbox: the applied messages, the
/// held aggregates, the schema check, the cleanup, the reader lease.
impl ConsumerInbox for Inbox {
    fn consumer(&self) -> &str {
        Inbox::consumer(self)
    }

    fn check_schema(&self) -> HeldFuture<()> {
        let inbox = self.clone();
        Box::pin(async move { Ok(inbox.check_table().await?) })
    }

    fn purge_applied(&self, older_than: Duration, batch_size: u32) -> HeldFuture<u64> {
        let inbox = self.clone();
        Box::pin(async move { Ok(inbox.purge(older_than, batch_size).await?) })
    }

    fn begin_group(&self) -> Option<GroupFuture<'static, Box<dyn InboxGroup>>> {
        let inbox = self.clone();
        Some(Box::pin(async move {
            let group: Box<dyn InboxGroup> = Box::new(OpenGroup::begin(inbox).await?);
            Ok(group)
        }))
    }

    fn limit_idle_transactions(&self, limit: Duration) {
        self.limit_idle(limit);
    }

    fn take_lease(
        &self,
        name: &str,
        holder: &str,
        duration: Duration,
    ) -> Option<HeldFuture<ReaderLease>> {
        let (inbox, name, holder) = (self.clone(), name.to_owned(), holder.to_owned());
        Some(Box::pin(async move {
            let table = lease_table(inbox.outbox().config().inbox_table());
            let found =
                lease_sql::take(inbox.outbox().db(), &table, &name, &holder, duration).await?;
            // Another's: the fence keeps this process's last token, so
            // what it still runs does not commit.
            if let ReaderLease::Ours { token } = found {
                inbox.remember_lease(&name, &holder, Some(token));
            }
            Ok(found)
        }))
    }

    fn end_lease(&self, name: &str, holder: &str) -> HeldFuture<()> {
        let (inbox, name, holder) = (self.clone(), name.to_owned(), holder.to_owned());
        Box::pin(async move {
            inbox.remember_lease(&name, &holder, None);
            let table = lease_table(inbox.outbox().config().inbox_table());
            Ok(lease_sql::end(inbox.outbox().db(), &table, &name, &holder).await?)
        })
    }

    fn cause_of(&self, error: &(dyn std::error::Error + 'static)) -> FailureCause {
        cause_of(error)
    }

    fn probe(&self) -> HeldFuture<()> {
        let inbox = self.clone();
        Box::pin(async move { super::probe::writable(inbox.outbox.db()).await })
    }
}

/// Whose fault `error` is: the first error of its source chain that is the
/// database's ([`OutboxError`] or [`DbErr`]) decides; the handler's if none is.
fn cause_of(error: &(dyn std::error::Error + 'static)) -> FailureCause {
    let mut next = Some(error);
    while let Some(err) = next {
        let outbox = err.downcast_ref::<OutboxError>();
        let unavailable = outbox.is_some_and(OutboxError::is_unavailable)
            || err
                .downcast_ref::<DbErr>()
                .is_some_and(crate::availability::is_unavailable);
        if unavailable {
            return FailureCause::Unavailable;
        }
        // A lost reader lease is not the message's fault either: the
        // subscriber hands what it holds back to the new reader.
        let lease_lost = matches!(outbox, Some(OutboxError::ReaderLeaseLost { .. }));
        let conflict = lease_lost
            || outbox.is_some_and(OutboxError::is_retryable)
            || err
                .downcast_ref::<DbErr>()
                .is_some_and(crate::contention::is_contention);
        if conflict {
            return FailureCause::Conflict;
        }
        next = err.source();
    }
    FailureCause::Handler
}
