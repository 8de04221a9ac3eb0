//! [`SqliteOutbox`]: the service's real outbox on SQLite in memory, over a
//! [`MemoryPublisher`], with the real processor to drain it.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;
use txoutbox_core::{IntegrationEvent, MessageId, OutboxMessage};
use txoutbox_sea_orm::sea_orm::{ConnectOptions, Database, DatabaseConnection};
use txoutbox_sea_orm::{Outbox, OutboxConfig, OutboxError, create_schema};

use crate::harness::{DEFAULT_DRAIN_TIMEOUT, DrainError, finish_drain};
use crate::memory_publisher::MemoryPublisher;
use crate::typed::{PublishedEvent, events_of};

/// A real [`txoutbox_sea_orm::Outbox`] on SQLite in memory (its tables
/// created), publishing into a [`MemoryPublisher`]: the production path
/// of a service (the same [`Outbox`], `Repository`, `UnitOfWork`,
/// `transaction`, and the real processor), with no server. Pass
/// [`outbox`](SqliteOutbox::outbox) to the functions the service runs,
/// then [`drain`](SqliteOutbox::drain) and read what was published, typed.
///
/// Feature `sea-orm` (the facade's `testing` with `sea-orm`, which any
/// database feature turns on).
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// # use txoutbox_core::IntegrationEvent;
/// # #[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
/// # #[event(name = "doc.sqlite.user.registered")]
/// # struct UserRegistered { id: u64 }
/// use txoutbox_sea_orm::{Outbox, OutboxError};
/// use txoutbox_testing::SqliteOutbox;
///
/// // The service's use case, as it runs in production.
/// async fn register(outbox: &Outbox, id: u64) -> Result<(), OutboxError> {
///     outbox
///         .transaction(async |mut uow| {
///             uow.enqueue(&UserRegistered { id })?;
///             Ok(())
///         })
///         .await
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let kit = SqliteOutbox::new().await?;
/// register(kit.outbox(), 7).await?;
/// let registered = kit.drain_events::<UserRegistered>().await?;
/// assert_eq!(registered[0].event, UserRegistered { id: 7 });
/// assert_eq!(kit.publisher().events::<UserRegistered>(), [UserRegistered { id: 7 }]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteOutbox {
    outbox: Outbox,
    publisher: MemoryPublisher,
    drain_timeout: Duration,
}

impl SqliteOutbox {
    /// A fresh database in memory with the outbox's tables (and the
    /// default [`OutboxConfig`]).
    pub async fn new() -> Result<Self, OutboxError> {
        Self::with_config(OutboxConfig::default()).await
    }

    /// A fresh database in memory with the outbox's tables, for `config`.
    /// One connection: every handle sees the same in-memory database.
    pub async fn with_config(config: OutboxConfig) -> Result<Self, OutboxError> {
        let mut options = ConnectOptions::new("sqlite::memory:");
        options
            .max_connections(1)
            .min_connections(1)
            // A connection closed for idling would take the database with it.
            .idle_timeout(None::<Duration>)
            .max_lifetime(None::<Duration>)
            .sqlx_logging(false);
        let db = Database::connect(options).await?;
        create_schema(&db, &config).await?;
        Ok(Self::on(db, config))
    }

    /// On a database of the caller's (its tables already created), e.g.
    /// one that also holds the service's own tables.
    pub fn on(db: DatabaseConnection, config: OutboxConfig) -> Self {
        Self {
            outbox: Outbox::new(db, config),
            publisher: MemoryPublisher::new(),
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }

    /// How long a drain may take before it fails as stuck.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// The outbox: hand it to the service's functions.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// The database (for the service's own tables and queries).
    pub fn db(&self) -> &DatabaseConnection {
        self.outbox.db()
    }

    /// The publisher the processor publishes into.
    pub fn publisher(&self) -> &MemoryPublisher {
        &self.publisher
    }

    /// Runs the real processor (the one
    /// [`Outbox::processor`](txoutbox_sea_orm::Outbox::processor) builds)
    /// until no message is due
    /// ([`due_now`](txoutbox_sea_orm::SeaOrmOutboxStore::due_now)), then
    /// stops it; returns the messages published during the drain.
    /// Messages backing off after a failure, delayed ones and dead ones stay.
    pub async fn drain(&self) -> Result<Vec<OutboxMessage>, DrainError> {
        let before: HashSet<MessageId> = self.publisher.messages().iter().map(|m| m.id).collect();
        let handle = self
            .outbox
            .processor(self.publisher.clone())
            .poll_interval(Duration::from_millis(2))
            .gather(Duration::ZERO)
            .shutdown_timeout(Duration::from_secs(1))
            .stats_interval(None)
            .build()?
            .spawn();
        let store = self.outbox.store();
        let started = Instant::now();
        loop {
            let due = match store.due_now().await {
                Ok(due) => due,
                Err(err) => {
                    let _ = handle.shutdown().await;
                    return Err(DrainError::Processor(
                        txoutbox_core::ErrorChain(&err).to_string(),
                    ));
                }
            };
            if due == 0 {
                break;
            }
            if handle.is_finished() || started.elapsed() > self.drain_timeout {
                // Stopped early (e.g. a missing table): its error says why.
                if let Err(err) = handle.shutdown().await {
                    return Err(DrainError::Processor(
                        txoutbox_core::ErrorChain(&err).to_string(),
                    ));
                }
                return Err(DrainError::Stuck {
                    waited: started.elapsed(),
                    left: usize::try_from(due).unwrap_or(usize::MAX),
                });
            }
            // Each look is a query on the processor's own one-connection
            // pool: not too often.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        finish_drain(handle, &before, || self.publisher.messages()).await
    }

    /// [`drain`](SqliteOutbox::drain), then the events of type `E` it
    /// published, decoded, with their envelopes.
    ///
    /// # Panics
    /// When a message of `E`'s name does not decode into `E`.
    pub async fn drain_events<E: IntegrationEvent>(
        &self,
    ) -> Result<Vec<PublishedEvent<E>>, DrainError> {
        Ok(events_of(self.drain().await?))
    }
}
