//! The reader-lease table's statements (`<inbox>_lease`, see
//! [`schema`](crate::schema)): one row per JetStream consumer, its holder,
//! a fencing token and an expiry by the database's clock.

use std::time::Duration;

use sea_orm::{ConnectionTrait, DbErr};
use txoutbox_core::consumer::ReaderLease;

use crate::dialect::{Dialect, Sql, millis};

/// Takes the lease `name` for `holder` for `duration`, or renews it: three
/// statements, each atomic on its own, so no transaction is held.
///
/// 1. An update that succeeds when `holder` has the lease or it expired
///    (the token grows when the holder changes);
/// 2. otherwise an insert, for a lease never taken (a unique violation:
///    another process inserted it first);
/// 3. a read of the row: who has it now, with which token.
pub(super) async fn take(
    db: &impl ConnectionTrait,
    table: &str,
    name: &str,
    holder: &str,
    duration: Duration,
) -> Result<ReaderLease, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let t = dialect.quote(table);
    let lease = millis(duration);
    // MySQL and MariaDB assign left to right, each assignment seeing the
    // ones before it: the token is computed before the holder changes.
    let mut update = Sql::new(dialect);
    update.push(&format!("UPDATE {t} SET token = CASE WHEN holder = "));
    update
        .bind(holder)
        .push(" THEN token ELSE token + 1 END, holder = ");
    update.bind(holder).push(", expires_at = ");
    let until = update.param(lease);
    update.push(&dialect.now_plus_millis(&until));
    update.push(" WHERE consumer = ").bind(name);
    update.push(" AND (holder = ").bind(holder);
    update.push(&format!(" OR expires_at < {})", dialect.now()));
    let updated = db.execute_raw(update.build()).await?.rows_affected();
    if updated == 0 {
        let mut insert = Sql::new(dialect);
        insert.push(&format!(
            "INSERT INTO {t} (consumer, holder, token, expires_at) VALUES ("
        ));
        insert.bind(name).push(", ").bind(holder).push(", 1, ");
        let until = insert.param(lease);
        insert.push(&dialect.now_plus_millis(&until)).push(")");
        match db.execute_raw(insert.build()).await {
            Ok(_) => {}
            Err(err) if super::is_unique_violation(&err) => {}
            Err(err) => return Err(err),
        }
    }
    let mut read = Sql::new(dialect);
    read.push(&format!("SELECT holder, token FROM {t} WHERE consumer = "))
        .bind(name);
    let row = db
        .query_one_raw(read.build())
        .await?
        .ok_or_else(|| DbErr::RecordNotFound(format!("the reader lease `{name}`")))?;
    let (found, token): (String, i64) = (row.try_get("", "holder")?, row.try_get("", "token")?);
    Ok(if found == holder {
        ReaderLease::Ours {
            token: u64::try_from(token).unwrap_or(0),
        }
    } else {
        ReaderLease::Theirs { holder: found }
    })
}

/// A reader lease this process holds, as its last take found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fence {
    /// The lease's name (a JetStream consumer's).
    pub(super) name: String,
    /// This process as holder.
    pub(super) holder: String,
    /// The fencing token it was given.
    pub(super) token: i64,
}

/// Whether every lease of `fences` is still its holder's with its token,
/// read in the transaction `db` (one statement). Expiry is not checked: a
/// lease that ran out and was not taken by another is still this
/// process's to renew, and the subscriber starts nothing past it.
pub(super) async fn fenced(
    db: &impl ConnectionTrait,
    table: &str,
    fences: &[Fence],
) -> Result<bool, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "SELECT COUNT(*) AS held FROM {} WHERE ",
        dialect.quote(table)
    ));
    for (k, fence) in fences.iter().enumerate() {
        if k > 0 {
            sql.push(" OR ");
        }
        sql.push("(consumer = ").bind(fence.name.as_str());
        sql.push(" AND holder = ").bind(fence.holder.as_str());
        sql.push(" AND token = ").bind(fence.token).push(")");
    }
    let row = db
        .query_one_raw(sql.build())
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("the reader leases".to_owned()))?;
    let held: i64 = row.try_get("", "held")?;
    Ok(usize::try_from(held).is_ok_and(|held| held == fences.len()))
}

/// Ends `holder`'s lease `name` now, if it has it: the row stays (the next
/// holder's token grows from its token), expired.
pub(super) async fn end(
    db: &impl ConnectionTrait,
    table: &str,
    name: &str,
    holder: &str,
) -> Result<(), DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "UPDATE {} SET expires_at = ",
        dialect.quote(table)
    ));
    let past = sql.param(-1_000_i64);
    sql.push(&dialect.now_plus_millis(&past));
    sql.push(" WHERE consumer = ").bind(name);
    sql.push(" AND holder = ").bind(holder);
    db.execute_raw(sql.build()).await.map(|_| ())
}
