//! The end of an inbox transaction (a group's, or one message's): it
//! commits only what it applied.
//!
//! Before its COMMIT the transaction counts, in itself, the inbox rows it
//! recorded. Should the database have ended the transaction while the
//! handlers ran and a handler have gone on (a swallowed deadlock on
//! MySQL/MariaDB), those rows are gone: the transaction is rolled back and
//! fails with [`OutboxError::InboxRowsMissing`], so nothing is
//! acknowledged and the messages are applied again. On PostgreSQL the
//! count also fails in a transaction an earlier statement aborted (whose
//! COMMIT PostgreSQL would turn into a silent ROLLBACK). Under a reader
//! lease it also checks, in itself, that the lease is still this
//! process's (its fencing token), so a process that lost it commits nothing.

use sea_orm::DatabaseTransaction;
use txoutbox_core::MessageId;

use super::{Inbox, sql};
use crate::autocommit;
use crate::error::OutboxError;

/// Commits `txn`, an inbox transaction of `inbox` that recorded the inbox
/// rows of `recorded` (distinct ids), if they are all still there; rolls
/// it back otherwise.
pub(super) async fn commit(
    inbox: &Inbox,
    txn: DatabaseTransaction,
    recorded: &[MessageId],
) -> Result<(), OutboxError> {
    if let Err(err) = check(inbox, &txn, recorded).await {
        discard(txn).await;
        return Err(err);
    }
    Ok(autocommit::commit(txn).await?)
}

/// Whether every row of `recorded` is still in `txn`.
async fn check(
    inbox: &Inbox,
    txn: &DatabaseTransaction,
    recorded: &[MessageId],
) -> Result<(), OutboxError> {
    if recorded.is_empty() {
        return Ok(());
    }
    let found = sql::count_recorded(txn, inbox.table(), inbox.consumer(), recorded).await?;
    let recorded = recorded.len() as u64;
    if found < recorded {
        let missing = recorded - found;
        tracing::warn!(consumer = %inbox.consumer(), missing, recorded, "inbox transaction rolled back under its handlers (a swallowed deadlock?): nothing committed");
        return Err(OutboxError::InboxRowsMissing { missing, recorded });
    }
    // Under a reader lease: only while it is still this process's.
    let fences = inbox.fences();
    if !fences.is_empty() {
        inbox.check_fences(txn, &fences).await?;
    }
    Ok(())
}

/// Rolls `txn` back, an inbox transaction that will not commit.
pub(super) async fn discard(txn: DatabaseTransaction) {
    if let Err(err) = autocommit::rollback(txn).await {
        tracing::debug!(%err, "rolling back an inbox transaction failed");
    }
}
