//! The inbox as a typed subscriber uses it: [`ThroughInbox`], the handler
//! [`Inbox::handler`] makes, and [`ConsumerInbox`] for [`Inbox`].

use std::sync::Arc;
use std::time::Duration;

use txoutbox_core::consumer::{ConsumerInbox, Handler, HandlerFuture, HeldFuture};
use txoutbox_core::{Delivery, HandlerError};

use super::handler::InboxHandler;
use super::{Inbox, Processed};

/// A subscriber handler that applies `H`'s effects through an inbox, in
/// one transaction with the inbox row: made by [`Inbox::handler`] (and its
/// `_with`/`_boxed` variants), given to a typed subscriber's `on`. It names
/// its inbox, so the subscriber also keeps each aggregate's messages in
/// order with it ([`Handler::inbox`]).
///
/// A test can run it as the subscriber does, with [`apply`](Self::apply),
/// which tells a duplicate from an application.
pub struct ThroughInbox<H> {
    inbox: Inbox,
    handler: Arc<H>,
}

impl<H> ThroughInbox<H> {
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
        }
    }
}

impl<H> std::fmt::Debug for ThroughInbox<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThroughInbox")
            .field("consumer", &self.inbox.consumer())
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
}

/// What a typed subscriber needs of its inbox: the applied messages, the
/// held aggregates, the schema check, the cleanup.
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
}
