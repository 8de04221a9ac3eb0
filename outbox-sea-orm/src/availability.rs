//! Database errors that mean "the database is away": it refuses or lost
//! the connection, is shutting down or starting, the pool had no connection
//! to give in time, or it takes no writes (a read-only replica: after a
//! failover, until the service's address points at the new primary). Not
//! the statement's fault: the same work succeeds once the database answers
//! again. [`OutboxError::is_unavailable`](crate::OutboxError::is_unavailable)
//! asks it.
//!
//! | backend | errors |
//! |---|---|
//! | any | no connection from the pool in time, the pool closed, I/O and TLS errors, a connection that broke mid-answer |
//! | PostgreSQL | class `08` (connection exception), `57P01` admin shutdown, `57P02` crash shutdown, `57P03` cannot connect now, `53300` too many connections, `25006` read-only transaction (a hot standby), `25P03` idle-in-transaction timeout (the transaction was ended under its work) |
//! | MySQL/MariaDB | 1040 too many connections, 1053 server shutdown, 1290 / 1836 / 1792 read-only, 1927 connection killed, 2002 / 2003 cannot connect, 2006 server gone away, 2013 lost connection, 4031 disconnected for inactivity |

use sea_orm::DbErr;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
use sea_orm::RuntimeErr;

/// Whether `err` says the database is away (see the module docs).
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub(crate) fn is_unavailable(err: &DbErr) -> bool {
    use sea_orm::sqlx::Error;
    let sqlx = match err {
        DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => return true,
        DbErr::Exec(RuntimeErr::SqlxError(err)) | DbErr::Query(RuntimeErr::SqlxError(err)) => err,
        _ => return false,
    };
    match sqlx.as_ref() {
        Error::Io(_)
        | Error::Tls(_)
        | Error::Protocol(_)
        | Error::PoolTimedOut
        | Error::PoolClosed
        | Error::WorkerCrashed => true,
        Error::Database(err) => database_away(err.as_ref()),
        _ => false,
    }
}

/// Whether the database's own error says it is away.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
fn database_away(err: &dyn sea_orm::sqlx::error::DatabaseError) -> bool {
    #[cfg(feature = "mysql")]
    if let Some(mysql) = err.try_downcast_ref::<sea_orm::sqlx::mysql::MySqlDatabaseError>() {
        return matches!(
            mysql.number(),
            1040 | 1053 | 1290 | 1792 | 1836 | 1927 | 2002 | 2003 | 2006 | 2013 | 4031
        );
    }
    #[cfg(feature = "postgres")]
    if err
        .try_downcast_ref::<sea_orm::sqlx::postgres::PgDatabaseError>()
        .is_some()
    {
        let code = err.code();
        return code.as_deref().is_some_and(|code| {
            code.starts_with("08")
                || matches!(
                    code,
                    "57P01" | "57P02" | "57P03" | "53300" | "25006" | "25P03"
                )
        });
    }
    let _ = err;
    false
}

/// Without a database driver (no backend feature) no error comes from one.
#[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
pub(crate) fn is_unavailable(_: &DbErr) -> bool {
    false
}
