//! [`Inbox`]: exactly-once effects for at-least-once deliveries.
//!
//! A broker delivers each message at least once: a producer re-publishes
//! after the deduplication window, an ack is lost, a consumer crashes after
//! its commit. The inbox makes the *effects* of a handler happen once: it
//! records `(consumer, message id)` in the inbox table **in the same
//! transaction** as the handler's own writes, so the handler's changes and
//! the "processed" mark commit together or not at all, and a repeat finds the
//! mark and is acknowledged without running the handler again.
//!
//! The handler gets a [`UnitOfWork`] begun with the context of the message it
//! handles ([`Delivery::caused_context`]): events it records (a consumer that
//! is also a producer) carry the same correlation id, are caused by the
//! handled message, and are committed in that same transaction.
//!
//! Metrics: `outbox_inbox_messages_total{consumer, outcome}`, `outcome`
//! being `applied` or `duplicate`.

mod batch;
mod commit;
mod group;
mod handler;
mod held;
mod held_bulk;
mod held_bulk_sql;
mod held_sql;
mod hold_filter;
mod lease_sql;
mod open_groups;
mod probe;
mod sql;
mod subscriber;

pub use batch::{BatchThroughInbox, Batched, FnBatchHandler, InboxBatchFn, InboxBatchHandler};
pub use handler::{FnHandler, InboxFn, InboxHandler};
pub use hold_filter::HoldFilter;
pub(crate) use probe::writable;
pub use subscriber::ThroughInbox;

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sea_orm::{DbErr, SqlErr, TransactionTrait};
use txoutbox_core::consumer::{AppliedFuture, AppliedMessages};
use txoutbox_core::{Delivery, HandlerError, MessageId};

use crate::autocommit;
use crate::error::OutboxError;
use crate::outbox::Outbox;
use crate::unit_of_work::UnitOfWork;

/// The future an inbox handler returns; it may borrow the unit of work.
pub type InboxFuture<'a> = Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send + 'a>>;

/// What [`Inbox::process`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Processed {
    /// The handler ran and its effects committed with the inbox row.
    Applied,
    /// The message was processed before (or is being processed by a
    /// transaction that has since committed); the handler did not run.
    Duplicate,
}

/// The inbox of one consumer: runs each message's handler at most once to
/// completion, in one transaction with the record that it did.
///
/// Hand a transactional handler to a typed subscriber with
/// [`handler`](Inbox::handler):
///
/// ```no_run
/// # use txoutbox_core::IntegrationEvent;
/// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
/// # #[event(name = "order.placed")] struct OrderPlaced { order_id: String, total_cents: i64 }
/// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
/// # #[event(name = "invoice.requested")] struct InvoiceRequested { order_id: String }
/// # async fn run(outbox: txoutbox_sea_orm::Outbox) -> Result<(), Box<dyn std::error::Error>> {
/// use txoutbox_core::{Delivery, HandlerError};
/// use txoutbox_sea_orm::{Inbox, UnitOfWork};
/// use sea_orm::ConnectionTrait;
///
/// async fn on_placed(event: OrderPlaced, _: Delivery, uow: &mut UnitOfWork) -> Result<(), HandlerError> {
///     uow.connection()
///         .await?
///         .execute_unprepared("UPDATE revenue SET cents = cents + 1")
///         .await?;                                               // the handler's effect ...
///     uow.enqueue(&InvoiceRequested { order_id: event.order_id })?; // ... a new event ...
///     Ok(())                                                       // ... and the inbox row: one commit
/// }
///
/// let inbox = Inbox::new(&outbox, "billing")?;
/// let on_placed = inbox.handler(on_placed);
/// // `on_placed` is a plain `Fn(OrderPlaced, Delivery) -> Future` handler:
/// // `Subscriber::builder(..).on(on_placed)` in outbox-nats.
/// # let _ = on_placed; Ok(()) }
/// ```
///
/// Rows are kept until [`purge`](Inbox::purge)d; keep them at least as long
/// as a repeat can still arrive: the longest redelivery span of the
/// consumer, and the time the producer may take to re-publish a message
/// (e.g. after the processor crashed between publishing and marking it).
#[derive(Debug, Clone)]
pub struct Inbox {
    outbox: Outbox,
    consumer: Arc<str>,
    /// How long a transaction of this inbox may sit idle, in milliseconds
    /// (0: no bound); shared by the clones handlers hold (see
    /// `ConsumerInbox::limit_idle_transactions`).
    idle_limit: Arc<AtomicU64>,
    /// The reader leases this inbox's subscriber holds, as its last take
    /// or renewal found them; shared by the clones handlers hold. An inbox
    /// transaction commits only if they still hold (see `lease_sql::fenced`).
    fences: Arc<std::sync::Mutex<Vec<lease_sql::Fence>>>,
}

impl Inbox {
    /// The inbox of `consumer` (1-128 bytes; usually the durable consumer's
    /// name) in `outbox`'s database, in the table
    /// [`OutboxConfig::inbox_table`](crate::OutboxConfig::inbox_table).
    pub fn new(outbox: &Outbox, consumer: impl Into<String>) -> Result<Self, OutboxError> {
        let consumer = consumer.into();
        if consumer.is_empty() || consumer.len() > 128 {
            return Err(OutboxError::InvalidConfig(format!(
                "inbox consumer name `{consumer}` must be 1-128 bytes"
            )));
        }
        Ok(Self {
            outbox: outbox.clone(),
            consumer: consumer.into(),
            idle_limit: Arc::new(AtomicU64::new(0)),
            fences: Arc::default(),
        })
    }

    /// The consumer name rows are recorded under.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// The outbox whose database holds the inbox (and whose units of work
    /// handlers get).
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// Checks that the inbox table, its held-messages table
    /// (`<inbox>_held`) and its reader-lease table (`<inbox>_lease`) exist with every column the inbox reads: a missing
    /// one is [`OutboxError::MissingSchema`], naming the migration to run
    /// (`outbox migrate`, `OutboxMigrator::up`); another error means the
    /// database could not answer. For a consumer's start, so a missing
    /// migration fails it at once instead of at the first message.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, OutboxError};
    /// let db = sea_orm::Database::connect("sqlite::memory:").await?;
    /// let outbox = Outbox::new(db, OutboxConfig::default());
    /// let inbox = Inbox::new(&outbox, "billing")?;
    /// let missing = inbox.check_table().await.unwrap_err();
    /// assert!(matches!(missing, OutboxError::MissingSchema(_)));
    /// assert!(missing.to_string().contains("outbox migrate"), "{missing}");
    ///
    /// txoutbox_sea_orm::create_schema(outbox.db(), outbox.config()).await?;
    /// inbox.check_table().await?;
    /// # Ok(()) }
    /// ```
    pub async fn check_table(&self) -> Result<(), OutboxError> {
        use crate::schema_check::{HELD, INBOX, LEASE, check};
        let inbox = self.outbox.config().inbox_table();
        let db = self.outbox.db();
        check(db, inbox.as_str(), inbox, &INBOX).await?;
        check(db, &crate::schema::held_table(inbox), inbox, &HELD).await?;
        check(db, &crate::schema::lease_table(inbox), inbox, &LEASE).await
    }

    fn table(&self) -> &str {
        self.outbox.config().inbox_table().as_str()
    }

    /// The reader leases to check before a commit (see `fences`).
    fn fences(&self) -> Vec<lease_sql::Fence> {
        self.fences
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Fails with [`OutboxError::ReaderLeaseLost`] unless `fences` all
    /// still hold, read in the transaction `db` about to commit.
    async fn check_fences(
        &self,
        db: &impl sea_orm::ConnectionTrait,
        fences: &[lease_sql::Fence],
    ) -> Result<(), OutboxError> {
        let table = crate::schema::lease_table(self.outbox.config().inbox_table());
        if lease_sql::fenced(db, &table, fences).await? {
            return Ok(());
        }
        tracing::warn!(consumer = %self.consumer, "the reader lease passed to another process: this transaction does not commit");
        Err(OutboxError::ReaderLeaseLost {
            consumer: self.consumer.to_string(),
        })
    }

    /// Remembers the token of the reader lease `name` that `holder` took
    /// (`None`: it gave the lease up): a fence to check before each commit.
    fn remember_lease(&self, name: &str, holder: &str, token: Option<u64>) {
        let mut fences = self
            .fences
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        fences.retain(|fence| fence.name != name);
        if let Some(token) = token {
            fences.push(lease_sql::Fence {
                name: name.to_owned(),
                holder: holder.to_owned(),
                token: i64::try_from(token).unwrap_or(i64::MAX),
            });
        }
    }

    /// How long a transaction of this inbox may sit idle, if bounded.
    fn idle_limit(&self) -> Option<Duration> {
        match self.idle_limit.load(Ordering::Relaxed) {
            0 => None,
            millis => Some(Duration::from_millis(millis)),
        }
    }

    /// Bounds how long a transaction of this inbox may sit idle: the
    /// longest limit asked for holds.
    fn limit_idle(&self, limit: Duration) {
        let millis = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX).max(1);
        self.idle_limit.fetch_max(millis, Ordering::Relaxed);
    }

    /// Processes one delivered message exactly once for this consumer:
    ///
    /// 1. begins a unit of work with the message's
    ///    [caused context](Delivery::caused_context);
    /// 2. inserts the inbox row; if it exists, rolls back and returns
    ///    [`Processed::Duplicate`] without running `handler` (a concurrent
    ///    transaction holding the same row is waited for first);
    /// 3. runs `handler` with the unit of work;
    /// 4. checks, in the transaction, that the inbox row is still there
    ///    (a database that ended the transaction under a handler which
    ///    went on, a swallowed deadlock on MySQL/MariaDB, took it away),
    ///    and commits: the handler's writes, the events it queued and the
    ///    inbox row, together.
    ///
    /// A handler error, any database error, a missing inbox row
    /// ([`OutboxError::InboxRowsMissing`]) or a unit of work that
    /// [saw a retryable failure](UnitOfWork::saw_retryable_failure) though
    /// its handler returned `Ok` ([`OutboxError::RetryableFailureSwallowed`])
    /// rolls everything back and is returned, so the message is
    /// redelivered and tried again.
    pub async fn process<E, F>(
        &self,
        event: E,
        delivery: Delivery,
        handler: F,
    ) -> Result<Processed, HandlerError>
    where
        F: for<'a> FnOnce(E, Delivery, &'a mut UnitOfWork) -> InboxFuture<'a>,
    {
        let id = delivery.message_id();
        let Some(mut uow) = self.open(&delivery).await? else {
            return Ok(Processed::Duplicate);
        };
        let handled = handler(event, delivery, &mut uow).await;
        self.close(uow, id, handled).await
    }

    /// [`process`](Inbox::process) with an [`InboxHandler`].
    pub async fn process_with<E, H: InboxHandler<E>>(
        &self,
        event: E,
        delivery: Delivery,
        handler: &H,
    ) -> Result<Processed, HandlerError> {
        let id = delivery.message_id();
        let Some(mut uow) = self.open(&delivery).await? else {
            return Ok(Processed::Duplicate);
        };
        let handled = handler.handle(event, delivery, &mut uow).await;
        self.close(uow, id, handled).await
    }

    /// Begins the message's inbox transaction, records the inbox row in it
    /// and lends it to a unit of work stamped with the message's caused
    /// context; `None` for a duplicate.
    async fn open(&self, delivery: &Delivery) -> Result<Option<UnitOfWork>, HandlerError> {
        let id = delivery.message_id();
        let txn = self.outbox.db().begin().await.map_err(OutboxError::from)?;
        let recorded = async {
            autocommit::turn_off(&txn).await?;
            sql::insert(
                &txn,
                self.table(),
                &self.consumer,
                id,
                delivery.event_name(),
                self.idle_limit(),
            )
            .await
        }
        .await;
        match recorded {
            Ok(()) => Ok(Some(
                self.outbox.begin_within(delivery.caused_context(), txn),
            )),
            Err(err) if is_unique_violation(&err) => {
                commit::discard(txn).await;
                tracing::debug!(consumer = %self.consumer, message_id = %id, "inbox: duplicate, handler skipped");
                self.count("duplicate");
                Ok(None)
            }
            Err(err) => {
                commit::discard(txn).await;
                Err(OutboxError::from(err).into())
            }
        }
    }

    /// After the handler of message `id` `handled` it: commits its effects
    /// with the inbox row, if it succeeded and the row is still there.
    async fn close(
        &self,
        uow: UnitOfWork,
        id: MessageId,
        handled: Result<(), HandlerError>,
    ) -> Result<Processed, HandlerError> {
        let swallowed = uow.saw_retryable_failure();
        let (txn, written) = uow.give_back().await;
        let txn = txn.ok_or(OutboxError::GroupTransactionLost)?;
        let outcome = handled.and_then(|()| match written {
            Ok(_) if swallowed => Err(OutboxError::RetryableFailureSwallowed.into()),
            written => written.map_err(HandlerError::from),
        });
        let written = match outcome {
            Ok(written) => written,
            Err(err) => {
                commit::discard(txn).await;
                return Err(err);
            }
        };
        commit::commit(self, txn, &[id]).await?;
        self.count("applied");
        self.outbox.committed_elsewhere(written).await;
        Ok(Processed::Applied)
    }

    /// Wraps a plain `async fn(E, Delivery, &mut UnitOfWork) ->
    /// Result<(), HandlerError>` into a typed subscriber handler,
    /// `Fn(E, Delivery) -> Future<Output = Result<(), HandlerError>>`, that
    /// [processes](Inbox::process) each message through this inbox. A
    /// duplicate resolves to `Ok(())`, so the subscriber acknowledges it.
    ///
    /// ```no_run
    /// # use txoutbox_core::IntegrationEvent;
    /// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
    /// # #[event(name = "order.paid")] struct OrderPaid { order_id: String }
    /// use txoutbox_core::{Delivery, HandlerError};
    /// use txoutbox_sea_orm::{Inbox, UnitOfWork};
    /// use sea_orm::ConnectionTrait;
    /// use sea_orm::sea_query::{Expr, ExprTrait, Query};
    ///
    /// async fn on_paid(event: OrderPaid, _: Delivery, uow: &mut UnitOfWork) -> Result<(), HandlerError> {
    ///     let mark_paid = Query::update()
    ///         .table("orders_view")
    ///         .value("paid", true)
    ///         .and_where(Expr::col("id").eq(event.order_id)) // bound, never formatted into the SQL
    ///         .to_owned();
    ///     uow.connection().await?.execute(&mark_paid).await?;
    ///     Ok(())
    /// }
    ///
    /// # fn run(inbox: Inbox) {
    /// let on_paid = inbox.handler(on_paid); // `.on(on_paid)` on a subscriber builder
    /// # let _ = on_paid; }
    /// ```
    ///
    /// A handler with state: [`handler_with`](Inbox::handler_with) (a type
    /// implementing [`InboxHandler`]) or [`handler_boxed`](Inbox::handler_boxed)
    /// (a closure).
    pub fn handler<E, F>(&self, handler: F) -> ThroughInbox<FnHandler<F>>
    where
        E: Send + 'static,
        F: for<'a> InboxFn<'a, E>,
    {
        self.handler_with(FnHandler(handler))
    }

    /// [`handler`](Inbox::handler) for a type implementing [`InboxHandler`].
    pub fn handler_with<E, H>(&self, handler: H) -> ThroughInbox<H>
    where
        E: Send + 'static,
        H: InboxHandler<E>,
    {
        ThroughInbox::new(self.clone(), handler)
    }

    /// [`handler`](Inbox::handler) for a closure that returns a boxed
    /// future, `|event, delivery, uow| Box::pin(async move { .. })`: a
    /// handler that captures state without a type of its own.
    pub fn handler_boxed<E, F>(&self, handler: F) -> ThroughInbox<FnHandler<F>>
    where
        E: Send + 'static,
        F: for<'a> Fn(E, Delivery, &'a mut UnitOfWork) -> InboxFuture<'a> + Send + Sync + 'static,
    {
        self.handler(handler)
    }

    /// Wraps a plain `async fn(Vec<Batched<E>>, &mut UnitOfWork) ->
    /// Result<(), HandlerError>` into a typed subscriber handler that applies
    /// several messages at once, each exactly once, when the subscriber
    /// applies in groups (a batch of one otherwise): one set-based statement
    /// for a whole batch instead of one per message. A batch holds each
    /// aggregate at most once; see [`InboxBatchHandler`] for what else it
    /// promises and what a failure costs.
    ///
    /// ```no_run
    /// # use txoutbox_core::IntegrationEvent;
    /// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
    /// # #[event(name = "order.paid")] struct OrderPaid { order_id: String, cents: i64 }
    /// use sea_orm::{ConnectionTrait, DbBackend, Statement};
    /// use txoutbox_core::HandlerError;
    /// use txoutbox_sea_orm::inbox::Batched;
    /// use txoutbox_sea_orm::{Inbox, UnitOfWork};
    ///
    /// /// One UPDATE for the whole batch (PostgreSQL): each order once in it.
    /// async fn on_paid(batch: Vec<Batched<OrderPaid>>, uow: &mut UnitOfWork) -> Result<(), HandlerError> {
    ///     let (ids, cents): (Vec<String>, Vec<i64>) =
    ///         batch.into_iter().map(|paid| (paid.event.order_id, paid.event.cents)).unzip();
    ///     let update = Statement::from_sql_and_values(
    ///         DbBackend::Postgres,
    ///         "UPDATE orders_view AS o SET paid_cents = o.paid_cents + p.cents \
    ///          FROM UNNEST($1::text[], $2::bigint[]) AS p(id, cents) WHERE o.id = p.id",
    ///         [ids.into(), cents.into()],
    ///     );
    ///     uow.connection().await?.execute_raw(update).await?;
    ///     Ok(())
    /// }
    ///
    /// # fn run(inbox: Inbox) {
    /// let on_paid = inbox.batch_handler(on_paid); // `.on(on_paid)` on a subscriber builder
    /// # let _ = on_paid; }
    /// ```
    pub fn batch_handler<E, F>(&self, handler: F) -> BatchThroughInbox<FnBatchHandler<F>>
    where
        E: Send + 'static,
        F: for<'a> InboxBatchFn<'a, E>,
    {
        self.batch_handler_with(FnBatchHandler(handler))
    }

    /// [`batch_handler`](Inbox::batch_handler) for a type implementing
    /// [`InboxBatchHandler`].
    pub fn batch_handler_with<E, H>(&self, handler: H) -> BatchThroughInbox<H>
    where
        E: Send + 'static,
        H: InboxBatchHandler<E>,
    {
        BatchThroughInbox::new(self.clone(), handler)
    }

    /// Whether this consumer has processed the message `id` (and its inbox
    /// row has not been purged).
    pub async fn contains(&self, id: MessageId) -> Result<bool, OutboxError> {
        Ok(self.recorded(&[id]).await?.contains(&id))
    }

    /// Those of `ids` this consumer has processed (one statement).
    pub async fn recorded(&self, ids: &[MessageId]) -> Result<HashSet<MessageId>, OutboxError> {
        Ok(sql::recorded(self.outbox.db(), self.table(), &self.consumer, ids).await?)
    }

    /// Deletes this consumer's inbox rows processed more than `older_than`
    /// ago (by the database clock), `batch_size` rows per statement so no
    /// statement holds many locks or runs long. Returns how many it deleted.
    ///
    /// Run it periodically:
    ///
    /// ```no_run
    /// # async fn run(inbox: txoutbox_sea_orm::Inbox) {
    /// use std::time::Duration;
    /// let mut every = tokio::time::interval(Duration::from_secs(3600));
    /// loop {
    ///     every.tick().await;
    ///     if let Err(err) = inbox.purge(Duration::from_secs(7 * 24 * 3600), 1000).await {
    ///         tracing::warn!(%err, "inbox purge failed");
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn purge(&self, older_than: Duration, batch_size: u32) -> Result<u64, OutboxError> {
        self.purge_reporting(older_than, batch_size, |_| {}).await
    }

    /// [`purge`](Self::purge), calling `progress` with the running total of
    /// deleted rows after each batch (for a progress bar).
    pub async fn purge_reporting(
        &self,
        older_than: Duration,
        batch_size: u32,
        mut progress: impl FnMut(u64) + Send,
    ) -> Result<u64, OutboxError> {
        let batch = batch_size.max(1);
        let mut purged = 0;
        loop {
            let deleted = sql::purge_batch(
                self.outbox.db(),
                self.table(),
                &self.consumer,
                older_than,
                batch,
            )
            .await?;
            purged += deleted;
            progress(purged);
            if deleted < u64::from(batch) {
                tracing::debug!(consumer = %self.consumer, purged, "inbox purged");
                return Ok(purged);
            }
        }
    }

    /// How many of this consumer's inbox rows were processed more than
    /// `older_than` ago: what [`purge`](Self::purge) would delete now.
    pub async fn count_processed_before(&self, older_than: Duration) -> Result<u64, OutboxError> {
        Ok(sql::count_before(self.outbox.db(), self.table(), &self.consumer, older_than).await?)
    }

    fn count(&self, outcome: &'static str) {
        self.count_many(outcome, 1);
    }

    fn count_many(&self, outcome: &'static str, messages: u64) {
        metrics::counter!(
            "outbox_inbox_messages_total",
            "consumer" => self.consumer.to_string(),
            "outcome" => outcome,
        )
        .increment(messages);
    }
}

/// What this consumer applied, for a subscriber that keeps each
/// aggregate's messages in order across its restarts
/// (`SubscriberBuilder::keep_order`).
impl AppliedMessages for Inbox {
    fn applied(&self, ids: Vec<MessageId>) -> AppliedFuture {
        let inbox = self.clone();
        Box::pin(async move { Ok(inbox.recorded(&ids).await?) })
    }
}

fn is_unique_violation(err: &DbErr) -> bool {
    matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_)))
}
