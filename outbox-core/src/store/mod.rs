//! What the processor needs from an outbox table: the [`OutboxStore`] trait
//! (claims, settlements, and the cleanup's purge of published rows); what an
//! operator does to it besides: the [`OutboxAdmin`] trait.
//!
//! Implemented for PostgreSQL, MySQL/MariaDB and SQLite by `outbox-sea-orm`.
//! Every time-dependent decision (is a lease live, is a retry due) is made
//! with the **database's** clock, never the caller's, so processors on
//! machines with skewed clocks still agree.

mod admin;
mod claimed;
mod error;
mod missing_schema;
mod retry;
mod settlement;
mod stats;

pub use admin::{DeadSelector, OutboxAdmin, SkipNote};
pub use claimed::{ClaimedBatch, ClaimedMessage, Lease};
pub use error::StoreError;
pub use missing_schema::MissingSchema;
pub use retry::RetryPolicy;
pub use settlement::{Failure, FailureKind, LeaseOutcome, Published};
pub use stats::{EventStats, OutboxStats};

/// The fencing token of a lease (see [`Lease`]).
pub use crate::id::LeaseToken;

use std::future::Future;
use std::time::Duration;

use crate::id::MessageId;

/// The outbox table as the processor sees it.
///
/// Claims respect per-aggregate order: a message is never handed out while an
/// earlier message of its aggregate is unpublished (pending elsewhere, backing
/// off, or dead), but runs of consecutive messages of one aggregate may be
/// claimed together. Two claimers never receive the same message while its
/// lease is live; an expired lease may be claimed again.
pub trait OutboxStore: Send + Sync {
    /// Leases up to `limit` publishable messages for `lease`. A message
    /// taken over from a lease that ran out has its
    /// [`abandoned`](ClaimedMessage::abandoned) count raised by one (every
    /// settlement ends a lease; only a holder that went away leaves one to
    /// run out), here and in [`claim_ids`](OutboxStore::claim_ids).
    fn claim(
        &self,
        limit: u32,
        lease: Duration,
    ) -> impl Future<Output = Result<ClaimedBatch, StoreError>> + Send;

    /// Leases these messages, by primary key, if they are publishable by the
    /// same rules as [`claim`](OutboxStore::claim): the processor's fast path
    /// for messages it was told were committed (in its own process, or named
    /// by another process's notification), which needs no query to find
    /// them. Ids that are not publishable (already published, leased
    /// elsewhere, behind an unpublished earlier message) are left out.
    fn claim_ids(
        &self,
        ids: &[MessageId],
        lease: Duration,
    ) -> impl Future<Output = Result<ClaimedBatch, StoreError>> + Send;

    /// Marks messages published (or deletes them, per the store's
    /// retention): those still pending under `token`, and those pending
    /// under no lease at all (a claim lost in a database crash; or the
    /// processor that took them over after the lease ran out gave them
    /// back): the broker acknowledged them, and nobody else is publishing
    /// them. Those another processor holds now (`stale`), or already
    /// published, are left as they are.
    fn complete(
        &self,
        token: LeaseToken,
        published: &[Published],
    ) -> impl Future<Output = Result<LeaseOutcome, StoreError>> + Send;

    /// Records failures: attempts + 1 and a backoff by the database clock, or
    /// `dead` with the reason when permanent or out of attempts. The lease ends.
    fn fail(
        &self,
        token: LeaseToken,
        failures: &[Failure],
        policy: &RetryPolicy,
    ) -> impl Future<Output = Result<LeaseOutcome, StoreError>> + Send;

    /// Gives unpublished messages back without spending an attempt.
    fn release(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
    ) -> impl Future<Output = Result<LeaseOutcome, StoreError>> + Send;

    /// Extends the lease of these messages, those still pending under
    /// `token`: `applied` counts them, `stale` the others (taken over by
    /// another processor after the lease ran out, or settled). A batch renews
    /// exactly its own messages, so it notices the loss of any one of them
    /// even when other batches share its token.
    fn renew(
        &self,
        token: LeaseToken,
        ids: &[MessageId],
        lease: Duration,
    ) -> impl Future<Output = Result<LeaseOutcome, StoreError>> + Send;

    /// Deletes published messages older than `older_than`, at most
    /// `batch_size` rows per statement, until none is left; returns how many.
    /// The processor's cleanup (`ProcessorBuilder::cleanup`, on by default)
    /// calls it while it runs, and `outbox purge` on demand. A store that
    /// deletes rows as they are published has none to delete (`Ok(0)`).
    fn purge_published(
        &self,
        older_than: Duration,
        batch_size: u32,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Counts by status and event name.
    fn stats(&self) -> impl Future<Output = Result<OutboxStats, StoreError>> + Send;

    /// Checks that the database answers and takes writes (not a read-only
    /// replica: after a failover, until the service's address points at the
    /// new primary): one round trip, as cheap as the store can make it. While
    /// the database is away, the processor asks this every 250 ms, with a
    /// timeout of its own (1 s) far below a pool's acquire timeout, to notice
    /// the database's return within a second instead of sending statements
    /// that each wait for a connection as long as the pool lets them; as
    /// [`ConsumerInbox::probe`](crate::consumer::ConsumerInbox::probe) does
    /// for a subscriber. The default answers `Ok` at once (a store that
    /// cannot tell: the processor then tries its statements directly).
    ///
    /// ```
    /// # async fn run(store: impl txoutbox_core::OutboxStore) {
    /// let answers = store.probe().await.is_ok();
    /// # let _ = answers; }
    /// ```
    fn probe(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        async { Ok(()) }
    }

    /// Checks that the table exists with every column this store needs;
    /// the processor calls it once as it starts. A missing table or column
    /// is a [`StoreError`] carrying a [`MissingSchema`] (see
    /// [`StoreError::missing_schema`]), which stops the processor with
    /// what to run; any other error (the database is unreachable) is
    /// retried. The default checks nothing (a store with no schema).
    ///
    /// ```
    /// # async fn run(store: impl txoutbox_core::OutboxStore) -> Result<(), txoutbox_core::StoreError> {
    /// if let Err(err) = store.check_schema().await {
    ///     if let Some(missing) = err.missing_schema() {
    ///         eprintln!("{missing}"); // names the table and what to run
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    fn check_schema(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        async { Ok(()) }
    }
}
