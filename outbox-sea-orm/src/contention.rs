//! Database errors that mean "other transactions were in the way": the
//! database rolled this one back (or refused it) and running it again may
//! succeed. They become [`OutboxError::Contention`](crate::OutboxError).
//!
//! | backend | errors |
//! |---|---|
//! | PostgreSQL | `40001` serialization failure, `40P01` deadlock detected, `55P03` lock not available |
//! | MySQL/MariaDB | 1213 deadlock, 1205 lock wait timeout |
//! | SQLite | `SQLITE_BUSY`, `SQLITE_LOCKED` (and their extended codes) |

use sea_orm::DbErr;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
use sea_orm::RuntimeErr;

/// Whether `err` is contention (see the module docs).
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub(crate) fn is_contention(err: &DbErr) -> bool {
    let (DbErr::Exec(RuntimeErr::SqlxError(err))
    | DbErr::Query(RuntimeErr::SqlxError(err))
    | DbErr::Conn(RuntimeErr::SqlxError(err))) = err
    else {
        return false;
    };
    let sea_orm::sqlx::Error::Database(err) = err.as_ref() else {
        return false;
    };
    #[cfg(feature = "mysql")]
    if let Some(mysql) = err.try_downcast_ref::<sea_orm::sqlx::mysql::MySqlDatabaseError>() {
        return matches!(mysql.number(), 1205 | 1213);
    }
    #[cfg(feature = "sqlite")]
    if err
        .try_downcast_ref::<sea_orm::sqlx::sqlite::SqliteError>()
        .is_some()
    {
        // The primary result code is the extended code's low byte.
        return err
            .code()
            .and_then(|code| code.parse::<i32>().ok())
            .is_some_and(|code| matches!(code & 0xff, 5 | 6));
    }
    matches!(err.code().as_deref(), Some("40001" | "40P01" | "55P03"))
}

/// Without a database driver (no backend feature) no error comes from one.
#[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
pub(crate) fn is_contention(_: &DbErr) -> bool {
    false
}
