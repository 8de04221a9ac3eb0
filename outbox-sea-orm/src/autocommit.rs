//! MySQL/MariaDB: inbox transactions whose statements never commit on
//! their own.
//!
//! InnoDB ends a transaction it picks as a deadlock's victim (error 1213):
//! it rolls the whole transaction back, and with the session's
//! `autocommit` on, every statement after that commits on its own. A
//! handler that catches the error and goes on (retries its statement)
//! would commit the rest of its effects, and those of the handlers after
//! it, outside the inbox transaction, whose inbox rows are gone. With
//! `autocommit` off while an inbox transaction is open, the statements
//! after such a rollback open a new transaction instead, which the inbox's
//! check before its commit finds without its rows and rolls back
//! (see `inbox::commit`).
//!
//! `autocommit` is a setting of the session, which outlives the
//! transaction on a pooled connection: every end of such a transaction
//! turns it back on, [`commit`] and [`rollback`], and [`end_later`] for a
//! transaction dropped on the way (a handler's panic, a cancelled future).
//! Other backends: the transaction as it is.

use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, DbErr};

/// Whether `txn` is on MySQL/MariaDB, whose inbox transactions turn
/// `autocommit` off.
fn turns_off(txn: &DatabaseTransaction) -> bool {
    txn.get_database_backend() == DbBackend::MySql
}

/// Turns `autocommit` off for `txn`'s session until the transaction ends
/// (MySQL/MariaDB; nothing elsewhere). The transaction must then end
/// through [`commit`], [`rollback`] or [`end_later`].
pub(crate) async fn turn_off(txn: &DatabaseTransaction) -> Result<(), DbErr> {
    if turns_off(txn) {
        txn.execute_unprepared("SET autocommit = 0").await?;
    }
    Ok(())
}

/// Commits `txn` and turns `autocommit` back on.
pub(crate) async fn commit(txn: DatabaseTransaction) -> Result<(), DbErr> {
    end(&txn, "COMMIT").await?;
    // On MySQL/MariaDB the driver's own COMMIT now finds nothing to commit.
    txn.commit().await
}

/// Rolls `txn` back and turns `autocommit` back on.
pub(crate) async fn rollback(txn: DatabaseTransaction) -> Result<(), DbErr> {
    end(&txn, "ROLLBACK").await?;
    txn.rollback().await
}

/// On MySQL/MariaDB: ends `txn` with `statement` (`COMMIT` or `ROLLBACK`),
/// then turns `autocommit` back on, whether the end succeeded or not (the
/// connection goes back to the pool either way); the first error.
async fn end(txn: &DatabaseTransaction, statement: &str) -> Result<(), DbErr> {
    if !turns_off(txn) {
        return Ok(());
    }
    let ended = txn.execute_unprepared(statement).await;
    let restored = txn.execute_unprepared("SET autocommit = 1").await;
    ended?;
    restored.map(drop)
}

/// Rolls `txn` back without waiting: for a transaction dropped before it
/// ended (its owner cannot wait in `Drop`). On MySQL/MariaDB on a task of
/// its own, which turns `autocommit` back on before the connection goes
/// back to the pool.
pub(crate) fn end_later(txn: DatabaseTransaction) {
    if !turns_off(&txn) {
        return; // Dropping it rolls it back.
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                if let Err(err) = rollback(txn).await {
                    tracing::warn!(%err, "rolling back a dropped inbox transaction failed");
                }
            });
        }
        Err(_) => tracing::error!(
            "an inbox transaction was dropped outside a Tokio runtime: its connection goes back \
             to the pool with autocommit off"
        ),
    }
}
