//! [`SeaOrmOutboxStore`]: the [`OutboxStore`] on PostgreSQL, MySQL/MariaDB
//! and SQLite.

mod claim;
mod dead;
mod inspect;
mod maintenance;
mod overview;
mod reconcile;
mod settle;
mod skip;
mod state;
mod stats;

pub use dead::DeadMessage;
pub use inspect::{AggregateQueue, StoredMessage};
pub use overview::{AggregateTypeStats, BlockedAggregate, Overview};
pub use state::MessageState;
pub use stats::STATS_EXACT_PENDING;

use std::time::Duration;

use sea_orm::DatabaseConnection;
use txoutbox_core::store::OutboxAdmin;
use txoutbox_core::store::{
    ClaimedBatch, DeadSelector, Failure, LeaseOutcome, LeaseToken, OutboxStats, Published, SkipNote,
};
use txoutbox_core::{MessageId, OutboxStore, RetryPolicy, StoreError};

use crate::config::OutboxConfig;
use crate::dialect::Dialect;

/// The outbox table as the processor uses it ([`OutboxStore`]: claims under
/// leases with fencing tokens, completions, failures with backoff, stats,
/// the cleanup's purge) and as an operator does ([`OutboxAdmin`]: requeue,
/// skip; also
/// [`message`](Self::message), [`aggregate_queue`](Self::aggregate_queue)
/// and [`overview`](Self::overview)). Every time comparison uses the
/// database clock.
///
/// How a claim keeps per-aggregate order, on every backend: it walks the
/// aggregates that have unpublished messages, looking only at each one's
/// head (its lowest unpublished sequence); from each head that is
/// publishable now it takes the run of consecutive publishable messages,
/// locks them (`FOR UPDATE SKIP LOCKED` on PostgreSQL and MySQL/MariaDB;
/// SQLite has one writer), and keeps a message only if every earlier
/// unpublished message of its aggregate is among the rows *it* locked. Two
/// claimers can therefore never split one aggregate's history between them,
/// and a claim's cost is bounded by its batch and the aggregates it visits:
/// never by published history, never by what waits behind a blocked head
/// (see the `claim` module for each backend's statements).
///
/// On PostgreSQL the claim and the completion, the processor's two
/// statements per batch, commit asynchronously (`synchronous_commit = off`
/// for their own transaction only): they return without waiting for the WAL
/// flush, and add no flush of their own to the writers'. A database crash
/// can lose the last such commits (up to three `wal_writer_delay`s, 600 ms
/// by default); what it loses is bookkeeping that at-least-once delivery
/// already covers: a lost claim leaves its rows claimable, a lost completion
/// leaves its rows pending, and the message is published again with the same
/// `Nats-Msg-Id` (dropped by the stream's deduplication window, or by the
/// consumers' inbox). The application's own commits are not affected.
#[derive(Debug, Clone)]
pub struct SeaOrmOutboxStore {
    db: DatabaseConnection,
    config: OutboxConfig,
    dialect: Dialect,
    cursor: claim::WalkCursor,
}

impl SeaOrmOutboxStore {
    /// A store on `db`, for the table and retention in `config`.
    pub fn new(db: DatabaseConnection, config: OutboxConfig) -> Self {
        let dialect = Dialect::of(db.get_database_backend());
        Self {
            db,
            config,
            dialect,
            cursor: claim::WalkCursor::default(),
        }
    }

    /// Not part of the API (for the plan tests): the plan of an ordinary
    /// claim of `limit`, PostgreSQL's `EXPLAIN (ANALYZE, BUFFERS, FORMAT
    /// JSON)` (run and rolled back) or SQLite's `EXPLAIN QUERY PLAN`.
    #[doc(hidden)]
    pub async fn explain_claim(&self, limit: u32) -> Result<String, StoreError> {
        claim::explain(self, limit).await
    }

    /// The oldest `limit` dead messages, each with its reason and how many
    /// later messages of its aggregate wait behind it (for operators: the
    /// `outbox dead list` command).
    pub async fn dead_messages(&self, limit: u32) -> Result<Vec<DeadMessage>, StoreError> {
        dead::dead_messages(self, limit).await
    }

    /// The message `id` as stored, in whatever state (for operators: `outbox
    /// dead show`); `None` when the table does not hold it.
    pub async fn message(&self, id: MessageId) -> Result<Option<StoredMessage>, StoreError> {
        inspect::message(self, id).await
    }

    /// One aggregate's lowest `limit` unsettled messages in sequence order,
    /// with their states, how many it has unsettled and its last settled
    /// sequence (for operators: `outbox aggregate`);
    /// [`AggregateQueue::blocker`] names what holds it back.
    pub async fn aggregate_queue(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        limit: u32,
    ) -> Result<AggregateQueue, StoreError> {
        inspect::aggregate_queue(self, aggregate_type, aggregate_id, None, limit).await
    }

    /// What waits behind `message`: the lowest `limit` unsettled messages of
    /// its aggregate after it, and how many there are (for operators:
    /// `outbox dead show`).
    pub async fn waiting_behind(
        &self,
        message: &StoredMessage,
        limit: u32,
    ) -> Result<AggregateQueue, StoreError> {
        inspect::aggregate_queue(
            self,
            &message.aggregate_type,
            &message.aggregate_id,
            Some(message.sequence),
            limit,
        )
        .await
    }

    /// The `limit` most recently skipped messages, newest first (see
    /// [`OutboxAdmin::skip_dead`]).
    pub async fn skipped_messages(&self, limit: u32) -> Result<Vec<StoredMessage>, StoreError> {
        skip::skipped_messages(self, limit).await
    }

    /// [`stats`](OutboxStore::stats) plus what an operator looks at: skipped
    /// messages, counts per aggregate type, and up to `blocked_limit`
    /// aggregates held behind a dead or backing-off head (`outbox status`).
    pub async fn overview(&self, blocked_limit: u32) -> Result<Overview, StoreError> {
        overview::overview(self, blocked_limit).await
    }

    /// [`purge_published`](OutboxStore::purge_published), calling `progress`
    /// with the running total of deleted rows after each batch (for a
    /// progress bar).
    pub async fn purge_published_reporting(
        &self,
        older_than: Duration,
        batch_size: u32,
        progress: impl FnMut(u64) + Send,
    ) -> Result<u64, StoreError> {
        maintenance::purge_published(self, older_than, batch_size, progress).await
    }

    /// How many published (and skipped) messages are older than
    /// `older_than`: what [`purge_published`](OutboxStore::purge_published)
    /// would delete now.
    pub async fn count_published(&self, older_than: Duration) -> Result<u64, StoreError> {
        maintenance::count_published(self, older_than).await
    }

    /// How many messages were published in each of the last `minutes`
    /// minutes (the current one first), by the database clock: the web
    /// console's publish-rate chart. One statement over the published rows
    /// of that span (through the published index); all zero when published
    /// rows are deleted as they are published
    /// ([`Retention`](crate::Retention)).
    pub async fn published_per_minute(&self, minutes: u32) -> Result<Vec<u64>, StoreError> {
        maintenance::published_per_minute(self, minutes).await
    }

    /// How many messages a processor has to publish now: pending and due,
    /// leased or not, and not held back by a dead or backing-off earlier
    /// message of their aggregate (delayed and backing-off messages are
    /// not due). Zero once a drain is done: the testing kit's
    /// `SqliteOutbox::drain` waits for it. One statement; for tests and
    /// tools, not a hot path (it reads every pending row).
    ///
    /// ```no_run
    /// # async fn run(outbox: txoutbox_sea_orm::Outbox) -> Result<(), txoutbox_core::StoreError> {
    /// let due = outbox.store().due_now().await?;
    /// # Ok(()) }
    /// ```
    pub async fn due_now(&self) -> Result<u64, StoreError> {
        maintenance::due_now(self).await
    }

    /// The quoted table name.
    fn table(&self) -> String {
        self.dialect.quote(self.config.table().as_str())
    }
}

fn store_err(what: &'static str) -> impl Fn(sea_orm::DbErr) -> StoreError {
    move |err| StoreError::new(what, err)
}

impl SeaOrmOutboxStore {
    /// Runs `statement` and reads each row it returns with `read_row`; a
    /// failure of either is a [`StoreError`] saying what was being `doing`.
    pub(crate) async fn read_rows<T>(
        &self,
        statement: sea_orm::Statement,
        doing: &'static str,
        read_row: impl FnMut(&sea_orm::QueryResult) -> Result<T, sea_orm::DbErr>,
    ) -> Result<Vec<T>, StoreError> {
        let read = store_err(doing);
        sea_orm::ConnectionTrait::query_all_raw(&self.db, statement)
            .await
            .map_err(&read)?
            .iter()
            .map(read_row)
            .collect::<Result<_, _>>()
            .map_err(read)
    }
}

impl OutboxStore for SeaOrmOutboxStore {
    async fn claim(&self, limit: u32, lease: Duration) -> Result<ClaimedBatch, StoreError> {
        claim::claim(self, limit, lease).await
    }

    async fn claim_ids(
        &self,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<ClaimedBatch, StoreError> {
        claim::claim_ids(self, ids, lease).await
    }

    async fn complete(
        &self,
        token: LeaseToken,
        published: &[Published],
    ) -> Result<LeaseOutcome, StoreError> {
        settle::complete(self, token, published).await
    }

    async fn fail(
        &self,
        token: LeaseToken,
        failures: &[Failure],
        policy: &RetryPolicy,
    ) -> Result<LeaseOutcome, StoreError> {
        settle::fail(self, token, failures, policy).await
    }

    async fn release(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
    ) -> Result<LeaseOutcome, StoreError> {
        settle::release(self, token, ids).await
    }

    async fn renew(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
        lease: Duration,
    ) -> Result<LeaseOutcome, StoreError> {
        settle::renew(self, token, ids, lease).await
    }

    async fn purge_published(
        &self,
        older_than: Duration,
        batch_size: u32,
    ) -> Result<u64, StoreError> {
        maintenance::purge_published(self, older_than, batch_size, |_| {}).await
    }

    async fn stats(&self) -> Result<OutboxStats, StoreError> {
        stats::stats(self).await
    }

    /// One statement: the database answers and is not a read-only replica
    /// (the inbox's probe).
    async fn probe(&self) -> Result<(), StoreError> {
        crate::inbox::writable(&self.db)
            .await
            .map_err(|err| StoreError::new("probing the database", err))
    }

    /// The table and every column the store reads, from all the
    /// migrations (see [`OutboxMigrator`](crate::migration)); a missing one
    /// is named with the migration that adds it.
    async fn check_schema(&self) -> Result<(), StoreError> {
        let table = self.config.table();
        crate::schema_check::check(
            &self.db,
            table.as_str(),
            table,
            &crate::schema_check::OUTBOX,
        )
        .await
        .map_err(StoreError::from)
    }
}

impl OutboxAdmin for SeaOrmOutboxStore {
    async fn requeue_dead(&self, selector: DeadSelector) -> Result<u64, StoreError> {
        maintenance::requeue_dead(self, selector).await
    }

    async fn skip_dead(&self, id: MessageId, note: &SkipNote) -> Result<bool, StoreError> {
        skip::skip_dead(self, id, note).await
    }
}
