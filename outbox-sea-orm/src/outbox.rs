//! [`Outbox`]: the handle a service keeps to write aggregates and events.

use std::marker::PhantomData;
use std::sync::Arc;

use sea_orm::{ConnectionTrait, DatabaseConnection};
use txoutbox_core::cleanup::Cleanup;
use txoutbox_core::processor::ProcessorBuilder;
use txoutbox_core::{
    IntegrationEvent, MessageContext, MessageId, PendingMessage, Processor, Publisher,
};

use crate::aggregate_entity::AggregateEntity;
use crate::config::{OutboxConfig, Retention};
use crate::error::OutboxError;
use crate::repository::Repository;
use crate::row::insert_messages;
use crate::shared::Shared;
use crate::store::SeaOrmOutboxStore;
use crate::unit_of_work::{Joined, UnitOfWork};
use crate::wake::{CommitListener, PgNotifications};

/// How many times [`Outbox::transaction`] runs a unit of work at most.
pub const TRANSACTION_ATTEMPTS: u32 = 5;

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

    /// Runs `work` in a unit of work and commits it; when the database gave
    /// up on it because of other transactions, or an aggregate it saved had
    /// moved ([`OutboxError::is_retryable`]), runs it again from the start,
    /// up to [`TRANSACTION_ATTEMPTS`] times, after a short pause with jitter
    /// (5 ms doubling up to 500 ms). Returns what `work` returned, or the
    /// last error.
    ///
    /// Each attempt is a fresh unit of work: `work` loads the aggregates it
    /// changes through it, so a retry sees what the other transaction
    /// committed. A failed attempt commits nothing, so a retried unit never
    /// writes its events twice. Any other error (and an error of `work`'s
    /// own) is returned at once.
    ///
    /// ```ignore
    /// // Two accounts in one transaction: a deadlock with a transfer the
    /// // other way round is retried, reloading both accounts.
    /// outbox
    ///     .transaction(|uow| Box::pin(async move {
    ///         let mut from = uow.load::<Account>("a-1").await?.ok_or(NotFound)?;
    ///         let mut to = uow.load::<Account>("a-2").await?.ok_or(NotFound)?;
    ///         from.debit(100)?; // records Debited
    ///         to.credit(100)?;  // records Credited
    ///         uow.save(&mut from).await?;
    ///         uow.save(&mut to).await?;
    ///         Ok(())
    ///     }))
    ///     .await?;
    /// ```
    pub async fn transaction<T, F>(&self, mut work: F) -> Result<T, OutboxError>
    where
        F: for<'u> FnMut(
            &'u mut UnitOfWork,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<T, OutboxError>> + Send + 'u>,
        >,
    {
        let mut pause = txoutbox_core::backoff::Doubling::new(
            std::time::Duration::from_millis(5),
            std::time::Duration::from_millis(500),
        );
        let mut attempt = 1;
        loop {
            let mut uow = self.begin();
            let result = match work(&mut uow).await {
                Ok(value) => uow.commit().await.map(|_| value),
                Err(err) => Err(err),
            };
            match result {
                Err(err) if err.is_retryable() && attempt < TRANSACTION_ATTEMPTS => {
                    tracing::debug!(attempt, error = %txoutbox_core::ErrorChain(&err), "outbox unit of work retried");
                    // Jittered, so contenders drift apart.
                    tokio::time::sleep(pause.next_pause()).await;
                    attempt += 1;
                }
                result => return result,
            }
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
