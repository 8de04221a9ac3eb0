//! Whether the inbox's database answers and takes writes: what a subscriber
//! paused by an outage asks before it goes on (see
//! [`ConsumerInbox::probe`](txoutbox_core::consumer::ConsumerInbox::probe)).

use std::error::Error;

use sea_orm::{ConnectionTrait, DbErr};

use crate::dialect::{Dialect, Sql};

/// One statement: `Ok` when the database answers and is not a read-only
/// replica (PostgreSQL in recovery, MySQL/MariaDB with `read_only` set);
/// [`ReadOnly`] when it answers and takes no writes.
pub(crate) async fn writable(
    db: &impl ConnectionTrait,
) -> Result<(), Box<dyn Error + Send + Sync>> {
    let dialect = Dialect::of(db.get_database_backend());
    let check = match dialect {
        Dialect::Postgres => {
            "SELECT CAST(CASE WHEN pg_is_in_recovery() THEN 1 ELSE 0 END AS INT8) AS read_only"
        }
        Dialect::MySql => "SELECT CAST(@@global.read_only AS SIGNED) AS read_only",
        Dialect::Sqlite => "SELECT 0 AS read_only",
    };
    let mut sql = Sql::new(dialect);
    sql.push(check);
    let row = db
        .query_one_raw(sql.build())
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("the probe's row".into()))?;
    if row.try_get::<i64>("", "read_only")? != 0 {
        return Err(Box::new(ReadOnly));
    }
    Ok(())
}

/// The database answers but takes no writes: a replica (after a failover,
/// until the service's address points at the new primary).
#[derive(Debug, thiserror::Error)]
#[error(
    "the database is read-only (a replica: after a failover, the address still points at the old primary?)"
)]
pub(super) struct ReadOnly;
