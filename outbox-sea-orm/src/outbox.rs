//! [`Outbox`]: the handle a service keeps to write aggregates and events.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use sea_orm::{ConnectionTrait, DatabaseConnection};
use txoutbox_core::cleanup::Cleanup;
use txoutbox_core::processor::ProcessorBuilder;
use txoutbox_core::{
    EventSubject, IntegrationEvent, MessageContext, MessageId, OutboxMessage, PendingMessage,
    Processor, Publisher,
};

use crate::aggregate_entity::AggregateEntity;
use crate::config::{OutboxConfig, Retention};
use crate::error::OutboxError;
use crate::repository::Repository;
use crate::row::insert_messages;
use crate::shared::Shared;
use crate::store::SeaOrmOutboxStore;
use crate::transaction::{TransactionRetry, TransactionUnit};
use crate::unit_of_work::{Joined, UnitOfWork};
use crate::wake::{CommitListener, PgNotifications};

/// The outbox of one database: begins units of work, hands out
/// repositories, and wakes processors after commits. Cheap to clone.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use txoutbox_sea_orm::{Outbox, OutboxConfig};
/// let db = sea_orm::Database::connect("postgres://postgres@127.0.0.1/test").await?;
/// let outbox = Outbox::new(db, OutboxConfig::default());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Outbox {
    inner: Arc<Shared>,
}

impl Outbox {
    /// An outbox on `db`.
    pub fn new(db: DatabaseConnection, config: OutboxConfig) -> Self {
        Self {
            inner: Shared::new(db, config),
        }
    }

    /// The database connection.
    pub fn db(&self) -> &DatabaseConnection {
        &self.inner.db
    }

    /// The settings.
    pub fn config(&self) -> &OutboxConfig {
        &self.inner.config
    }

    /// Begins a unit of work whose messages get a fresh correlation. Nothing
    /// is sent to the database yet: the unit opens its transaction only if
    /// it needs one (see [`UnitOfWork`]).
    pub fn begin(&self) -> UnitOfWork {
        self.begin_with(MessageContext::new())
    }

    /// Begins a unit of work whose messages carry `context`.
    pub fn begin_with(&self, context: MessageContext) -> UnitOfWork {
        UnitOfWork::new(Arc::clone(&self.inner), context)
    }

    /// A unit of work inside `txn`, a transaction opened elsewhere (an
    /// inbox's group transaction): see [`UnitOfWork::within`].
    pub(crate) fn begin_within(
        &self,
        context: MessageContext,
        txn: sea_orm::DatabaseTransaction,
    ) -> UnitOfWork {
        UnitOfWork::within(Arc::clone(&self.inner), context, txn)
    }

    /// After a transaction opened elsewhere committed `messages`: wakes the
    /// processors.
    pub(crate) async fn committed_elsewhere(&self, messages: Vec<OutboxMessage>) {
        self.inner.committed(messages, None).await;
    }

    /// Runs `work` in a unit of work and commits it, running it again from
    /// the start when the attempt met a conflict another transaction caused
    /// (a deadlock, a lock timeout, a serialization failure, SQLite busy, or
    /// an aggregate that moved since it was loaded: the unit of work
    /// [saw a retryable failure](UnitOfWork::saw_retryable_failure)), up to
    /// [`TRANSACTION_ATTEMPTS`](crate::TRANSACTION_ATTEMPTS) attempts, after a short pause with jitter
    /// (5 ms doubling up to 500 ms). Returns what `work` returned, or the
    /// last error. An error of `work`'s own (`E` is yours, anything that a
    /// [`OutboxError`] converts into) is returned at once.
    /// [`transaction_with`](Outbox::transaction_with) takes another
    /// [`TransactionRetry`].
    ///
    /// `work` is an async closure that gets the attempt's unit of work by
    /// value, a [`TransactionUnit`] (it dereferences to [`UnitOfWork`]):
    /// `async |mut uow| { .. }`, no `Box::pin`. The unit comes back when
    /// the closure's future completes and is committed (or rolled back, if
    /// `work` failed); `work` cannot commit it itself. By value, because
    /// a closure borrowing `&mut UnitOfWork` needs a higher-ranked bound,
    /// and with one rustc cannot prove the caller's future `Send` (so it
    /// would not compile in `tokio::spawn` or an axum handler). An owned
    /// argument has no such bound: this compiles wherever the closure's
    /// captures allow. Capture what you need by reference (`async |uow|`,
    /// not `async move |uow|`: a `move` closure that keeps what it owns
    /// cannot be called twice, and rustc says so).
    ///
    /// Each attempt is a fresh unit of work: `work` loads the aggregates it
    /// changes through it, so a retry sees what the other transaction
    /// committed. A failed attempt commits nothing, so a retried unit never
    /// writes its events twice. Errors of the application's own statements
    /// count as conflicts when they pass through
    /// [`UnitOfWork::checked`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use txoutbox_core::IntegrationEvent;
    /// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
    /// # #[event(name = "account.debited")]
    /// # struct Debited { account: String, cents: i64 }
    /// use sea_orm::{ConnectionTrait, DbBackend, Statement};
    /// use txoutbox_sea_orm::{Outbox, OutboxConfig, OutboxError, create_schema};
    ///
    /// #[derive(Debug)]
    /// enum AppError { NotFound, Outbox(OutboxError) }
    /// impl From<OutboxError> for AppError {
    ///     fn from(err: OutboxError) -> Self { AppError::Outbox(err) }
    /// }
    ///
    /// let db = sea_orm::Database::connect("sqlite::memory:").await?;
    /// create_schema(&db, &OutboxConfig::default()).await?;
    /// db.execute_unprepared("CREATE TABLE accounts (id TEXT PRIMARY KEY, cents INTEGER NOT NULL)").await?;
    /// db.execute_unprepared("INSERT INTO accounts VALUES ('a-1', 500)").await?;
    /// let outbox = Outbox::new(db, OutboxConfig::default());
    ///
    /// // Debits an account and records the event, in one transaction.
    /// let debit = async |account: &str, cents: i64| {
    ///     outbox
    ///         .transaction(async |mut uow| {
    ///             let debit = Statement::from_sql_and_values(
    ///                 DbBackend::Sqlite,
    ///                 "UPDATE accounts SET cents = cents - ? WHERE id = ? RETURNING cents",
    ///                 [cents.into(), account.into()],
    ///             );
    ///             let row = uow.connection().await?.query_one_raw(debit).await;
    ///             let row = uow.checked(row)?.ok_or(AppError::NotFound)?;
    ///             let left: i64 = uow.checked(row.try_get("", "cents"))?;
    ///             uow.enqueue(&Debited { account: account.to_owned(), cents })?;
    ///             Ok(left)
    ///         })
    ///         .await
    /// };
    /// assert_eq!(debit("a-1", 100).await.ok(), Some(400));
    /// // The application's own error: returned at once, nothing committed.
    /// assert!(matches!(debit("a-2", 100).await, Err(AppError::NotFound)));
    /// # Ok(()) }
    /// ```
    pub async fn transaction<T, E, F, Fut>(&self, work: F) -> Result<T, E>
    where
        F: FnMut(TransactionUnit) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<OutboxError>,
    {
        self.transaction_with(TransactionRetry::default(), work)
            .await
    }

    /// [`transaction`](Outbox::transaction), retrying as `retry` says.
    ///
    /// ```no_run
    /// # async fn run(outbox: txoutbox_sea_orm::Outbox) -> Result<(), txoutbox_sea_orm::OutboxError> {
    /// use txoutbox_sea_orm::{OutboxError, TransactionRetry};
    /// let ids = outbox
    ///     .transaction_with(TransactionRetry::never(), async |mut uow| {
    ///         uow.connection().await?; // ... the attempt ...
    ///         Ok::<_, OutboxError>(())
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn transaction_with<T, E, F, Fut>(
        &self,
        retry: TransactionRetry<E>,
        mut work: F,
    ) -> Result<T, E>
    where
        F: FnMut(TransactionUnit) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<OutboxError>,
    {
        let mut pause = txoutbox_core::backoff::Doubling::new(
            std::time::Duration::from_millis(5),
            std::time::Duration::from_millis(500),
        );
        let mut attempt = 1;
        loop {
            let (unit, returned) = TransactionUnit::new(self.begin());
            let outcome = work(unit).await;
            let (err, saw_retryable) = match (outcome, returned.take()) {
                (Ok(value), Ok(uow)) => match uow.commit().await {
                    Ok(_) => return Ok(value),
                    Err(err) => {
                        let retryable = err.is_retryable();
                        (E::from(err), retryable)
                    }
                },
                (Ok(_), Err(kept)) => return Err(E::from(kept)),
                (Err(err), Ok(uow)) => {
                    let saw_retryable = uow.saw_retryable_failure();
                    if let Err(rollback) = uow.rollback().await {
                        tracing::debug!(error = %txoutbox_core::ErrorChain(&rollback), "outbox unit of work rollback failed (the database drops it)");
                    }
                    (err, saw_retryable)
                }
                (Err(err), Err(_kept)) => (err, false),
            };
            if attempt >= retry.max_attempts() || !retry.retries(&err, saw_retryable) {
                return Err(err);
            }
            tracing::debug!(attempt, "outbox unit of work retried");
            // Jittered, so contenders drift apart.
            tokio::time::sleep(pause.next_pause()).await;
            attempt += 1;
        }
    }

    /// A repository of `A` aggregates.
    pub fn repository<A: AggregateEntity>(&self) -> Repository<A> {
        Repository {
            shared: Arc::clone(&self.inner),
            aggregate: PhantomData,
        }
    }

    /// Joins a transaction (or connection) the application owns: aggregates
    /// saved through the returned [`Joined`] are written into it with their
    /// events, in per-aggregate order, and commit or roll back with the
    /// application's own changes. See [`Joined`].
    pub fn join<'t, C: ConnectionTrait>(&self, txn: &'t C) -> Joined<'t, C> {
        self.join_with(txn, MessageContext::new())
    }

    /// [`join`](Outbox::join), with messages carrying `context`.
    pub fn join_with<'t, C: ConnectionTrait>(
        &self,
        txn: &'t C,
        context: MessageContext,
    ) -> Joined<'t, C> {
        Joined::new(Arc::clone(&self.inner), txn, context)
    }

    /// Writes `event` as an outbox row on a connection or transaction the
    /// application owns, so it commits (or rolls back) with the
    /// application's own changes. Call [`wake`](Outbox::wake) after that
    /// commit to spare processors their polling delay.
    ///
    /// ```no_run
    /// # use txoutbox_core::{IntegrationEvent, MessageContext};
    /// # #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
    /// # #[event(name = "user.registered")] struct UserRegistered { id: u64 }
    /// # async fn run(outbox: txoutbox_sea_orm::Outbox) -> Result<(), Box<dyn std::error::Error>> {
    /// use sea_orm::TransactionTrait;
    /// let txn = outbox.db().begin().await?;
    /// // ... the application's own statements on `txn` ...
    /// outbox.enqueue(&txn, &UserRegistered { id: 7 }, &MessageContext::new()).await?;
    /// txn.commit().await?;
    /// outbox.wake();
    /// # Ok(()) }
    /// ```
    pub async fn enqueue<E: IntegrationEvent>(
        &self,
        db: &impl ConnectionTrait,
        event: &E,
        context: &MessageContext,
    ) -> Result<MessageId, OutboxError> {
        let mut message = self.inner.standalone(PendingMessage::new(event)?, context);
        let id = message.id;
        insert_messages(
            db,
            self.config().table(),
            std::slice::from_mut(&mut message),
        )
        .await?;
        Ok(id)
    }

    /// Wakes processors after the application committed messages it
    /// [`enqueue`](Outbox::enqueue)d on its own transaction.
    pub fn wake(&self) {
        self.inner.wakers.wake_all();
    }

    /// Subscribes to the messages committed by this process's units of work
    /// (the in-process processor's fast path).
    pub fn listen(&self) -> CommitListener {
        self.inner.wakers.listen()
    }

    /// A processor on this outbox, publishing with `publisher`, woken by the
    /// commits of this process (leased by id, no query to find them; on
    /// PostgreSQL the unit of work even writes them leased to it, so it
    /// publishes them without a claim) and, on PostgreSQL, by the `NOTIFY`s
    /// of other processes; it polls as a fallback. While it (or its builder) exists, this process's commits
    /// send no `NOTIFY`: it serves them itself. Tune it with the returned builder, then `build()?.spawn()`.
    ///
    /// The same call runs a processor as its own process: its commit
    /// listener then simply stays quiet.
    ///
    /// Published rows ([`Retention::KeepPublished`]) are deleted once
    /// they are 7 days old: the processor looks hourly and deletes them in
    /// batches ([`Cleanup`]). Keep them longer with `.cleanup(Cleanup::keep_for(..))`,
    /// or for ever with `.without_cleanup()`.
    ///
    /// ```no_run
    /// # async fn run(outbox: txoutbox_sea_orm::Outbox, publisher: impl txoutbox_core::Publisher) -> Result<(), Box<dyn std::error::Error>> {
    /// let processor = outbox.processor(publisher).batch_size(500).build()?.spawn();
    /// // ... serve ...
    /// processor.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub fn processor<P: Publisher>(&self, publisher: P) -> ProcessorBuilder<SeaOrmOutboxStore, P> {
        let store = SeaOrmOutboxStore::new(self.db().clone(), self.config().clone());
        // Its own commits reach it through the listener, and while it lives
        // they send no NOTIFY (it claims them at once; other processes would
        // only find them leased); NOTIFYs from this process, e.g. after
        // `Outbox::wake`, would only make it claim twice.
        let mut builder =
            Processor::builder(store, publisher).wake_on(self.inner.wakers.listen_to_serve());
        if publishes_under_the_prefix() {
            let prefix = self.config().subject_prefix().as_str();
            builder = builder.destination(format!("{prefix}.>"));
        }
        if self.config().retention() == Retention::KeepPublished {
            builder = builder.cleanup(Cleanup::default());
        }
        match PgNotifications::new(self.db(), self.config()) {
            Some(notifications) => {
                builder.wake_on(notifications.ignoring(self.inner.wakers.origin()))
            }
            None => builder,
        }
    }

    /// Whether a processor in this process is running and takes this
    /// process's commits already leased to it (it made its lease offer: the
    /// unit of work then writes PostgreSQL rows leased to it, and it
    /// publishes them without a claim). For health checks, and for tests
    /// that must not commit before the processor runs.
    ///
    /// ```no_run
    /// # async fn run(outbox: txoutbox_sea_orm::Outbox, publisher: impl txoutbox_core::Publisher) -> Result<(), Box<dyn std::error::Error>> {
    /// let processor = outbox.processor(publisher).build()?.spawn();
    /// while !outbox.processor_takes_commits() {
    ///     tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn processor_takes_commits(&self) -> bool {
        self.inner.wakers.offered()
    }

    /// The store the processor claims from (for operations: stats, requeue,
    /// purge).
    pub fn store(&self) -> SeaOrmOutboxStore {
        self.inner.store()
    }
}

/// Whether an event type of this program takes its subject from the
/// outbox's prefix (not a fixed `subject = ".."`): then the processor
/// publishes under `<prefix>.>`, and [`Processor::check`] asks the broker
/// whether a stream captures it.
fn publishes_under_the_prefix() -> bool {
    txoutbox_core::registry::EventRegistry::from_inventory().is_ok_and(|registry| {
        registry
            .iter()
            .any(|registration| matches!(registration.subject(), EventSubject::Derived))
    })
}
