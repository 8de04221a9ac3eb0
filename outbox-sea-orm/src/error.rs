//! Errors of the unit of work, the repository and the store.

use txoutbox_core::naming::InvalidName;
use txoutbox_core::store::MissingSchema;
use txoutbox_core::{InvalidHeader, MessageId, RecordError, StoreError};

/// What went wrong while writing to, or reading from, the outbox.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutboxError {
    /// The database refused or failed; nothing of the unit of work was committed.
    #[error("database: {0}")]
    Db(sea_orm::DbErr),
    /// The database gave up on the unit of work because other transactions
    /// were in the way (a deadlock, a lock wait timeout, a serialization
    /// failure, SQLite busy): nothing was committed, and running it again
    /// from the start may succeed ([`Outbox::transaction`](crate::Outbox::transaction)
    /// does).
    #[error("database contention, nothing committed (run the unit of work again): {0}")]
    Contention(sea_orm::DbErr),
    /// The aggregate changed since it was loaded (or was created twice);
    /// reload it and apply the command again. Nothing was written.
    #[error(
        "concurrency conflict on {aggregate_type} {aggregate_id}: expected version \
         {expected_version}, but it was changed by someone else"
    )]
    ConcurrencyConflict {
        /// The aggregate type.
        aggregate_type: &'static str,
        /// The aggregate id.
        aggregate_id: String,
        /// The version the save expected to find.
        expected_version: u64,
    },
    /// An event could not be recorded (serialization, headers).
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A message cannot be stored as it is.
    #[error("message {id} cannot be stored: {reason}")]
    InvalidMessage {
        /// The message.
        id: MessageId,
        /// Why.
        reason: String,
    },
    /// The unit of work [`Outbox::transaction`](crate::Outbox::transaction)
    /// gave its closure was kept past the closure's future (moved into a
    /// task, or returned), so it could not be committed: nothing was.
    #[error(
        "the unit of work of Outbox::transaction outlived its closure's future (moved into a \
         task or returned): nothing was committed"
    )]
    UnitOfWorkKept,
    /// A handler applied through an inbox (alone, or in a group) replaced
    /// the unit of work it was given (`*uow = ..`), taking the inbox's
    /// transaction with it, or stopped half way with the group's
    /// transaction; or an inbox handler was given a group whose
    /// transaction no inbox of this process holds open (a group another
    /// kind of inbox began): nothing of the message or group was committed.
    #[error(
        "a handler applied through an inbox replaced its unit of work, and the inbox's \
         transaction with it (or was given a group whose transaction is not open): nothing \
         was committed"
    )]
    GroupTransactionLost,
    /// An inbox transaction lost some of the inbox rows it recorded before
    /// its commit: the database rolled it back while its handlers ran (a
    /// deadlock on MySQL/MariaDB, which ends the transaction, one of its
    /// handlers caught and went on from) and the statements after that ran
    /// outside it. Nothing was committed or acknowledged; applying the
    /// messages again may succeed.
    #[error(
        "the inbox transaction was rolled back under its handlers (a swallowed deadlock?): \
         {missing} of {recorded} inbox rows are missing; nothing was committed or acknowledged"
    )]
    InboxRowsMissing {
        /// Inbox rows recorded in the transaction and gone before its commit.
        missing: u64,
        /// Inbox rows the transaction recorded.
        recorded: u64,
    },
    /// A handler returned `Ok` although its unit of work met contention or
    /// a concurrency conflict ([`UnitOfWork::saw_retryable_failure`](crate::UnitOfWork::saw_retryable_failure)):
    /// the handler caught the error and went on, so its transaction may
    /// already be rolled back. Nothing was committed or acknowledged;
    /// applying the message again may succeed.
    #[error(
        "a handler returned Ok after its unit of work met contention or a conflict (a \
         swallowed deadlock?): nothing was committed or acknowledged"
    )]
    RetryableFailureSwallowed,
    /// The table is missing, or lacks columns this version needs (a
    /// migration has not run): the error names what to run. From the
    /// processor's start ([`OutboxStore::check_schema`](txoutbox_core::OutboxStore::check_schema))
    /// and [`Inbox::check_table`](crate::Inbox::check_table).
    #[error(transparent)]
    MissingSchema(MissingSchema),
    /// A name or setting is invalid.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// An inbox transaction of a subscriber that reads under a reader
    /// lease was about to commit after the lease passed to another process
    /// (this one froze, or was cut off from the database past the lease):
    /// nothing was committed; the new reader applies the messages.
    #[error(
        "the reader lease of inbox consumer `{consumer}` passed to another process: nothing \
         was committed"
    )]
    ReaderLeaseLost {
        /// The inbox's consumer.
        consumer: String,
    },
}

impl OutboxError {
    /// Whether running the unit of work again from the start (reloading its
    /// aggregates) may succeed: [`Contention`](Self::Contention),
    /// [`ConcurrencyConflict`](Self::ConcurrencyConflict), and an inbox
    /// transaction that lost its rows under its handlers
    /// ([`InboxRowsMissing`](Self::InboxRowsMissing),
    /// [`RetryableFailureSwallowed`](Self::RetryableFailureSwallowed)).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            OutboxError::Contention(_)
                | OutboxError::ConcurrencyConflict { .. }
                | OutboxError::InboxRowsMissing { .. }
                | OutboxError::RetryableFailureSwallowed
        )
    }

    /// Whether the database is away (see [`FailureCause::Unavailable`]):
    /// the connection was refused or lost, the pool had none to give in
    /// time, the server is shutting down or starting, or it takes no writes
    /// (a read-only replica after a failover). Nothing was committed, and
    /// the same work succeeds once the database answers again; a subscriber
    /// pauses on it instead of spending the message's deliveries.
    ///
    /// [`FailureCause::Unavailable`]: txoutbox_core::consumer::FailureCause::Unavailable
    pub fn is_unavailable(&self) -> bool {
        matches!(self, OutboxError::Db(err) if crate::availability::is_unavailable(err))
    }
}

/// Contention (see [`OutboxError::Contention`]) is told apart from other
/// database errors here, where every database error comes in.
impl From<sea_orm::DbErr> for OutboxError {
    fn from(err: sea_orm::DbErr) -> Self {
        if crate::contention::is_contention(&err) {
            OutboxError::Contention(err)
        } else {
            OutboxError::Db(err)
        }
    }
}

impl From<InvalidName> for OutboxError {
    fn from(err: InvalidName) -> Self {
        OutboxError::InvalidConfig(err.to_string())
    }
}

impl From<InvalidHeader> for OutboxError {
    fn from(err: InvalidHeader) -> Self {
        OutboxError::Record(RecordError::Header(err))
    }
}

impl From<OutboxError> for StoreError {
    fn from(err: OutboxError) -> Self {
        match err {
            // As its own source, so `StoreError::missing_schema` finds it.
            OutboxError::MissingSchema(missing) => StoreError::from(missing),
            err => StoreError::new("outbox store", err),
        }
    }
}
