//! What PostgreSQL did: statements the client sent (by kind, with their
//! time, through SeaORM's metric callback), transactions the server counted
//! (`pg_stat_database`), other clients of the database, and whether
//! `pg_stat_statements` can be asked.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use crate::harness::error::BoxError;
use crate::harness::fixture::APPLICATION_NAME;

/// Prepared statements sent on one pool, by kind. `BEGIN`, `COMMIT` and
/// `execute_unprepared` text (the claim's `SET LOCAL`) do not pass SeaORM's
/// metric callback; the drain adds them from the store's call counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct StatementLog {
    kinds: Arc<Mutex<BTreeMap<&'static str, (u64, Duration)>>>,
}

impl StatementLog {
    /// Logs every statement sent through `db` (and its clones made later).
    pub(crate) fn install(db: &mut DatabaseConnection) -> Self {
        let log = Self::default();
        let kinds = Arc::clone(&log.kinds);
        db.set_metric_callback(move |info| {
            let kind = classify(&info.statement.sql);
            let mut kinds = kinds.lock().unwrap_or_else(PoisonError::into_inner);
            let entry = kinds.entry(kind).or_default();
            entry.0 += 1;
            entry.1 += info.elapsed;
        });
        log
    }

    /// Statements so far, by kind: (count, time spent waiting for them).
    pub(crate) fn snapshot(&self) -> Snapshot {
        self.kinds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Statements by kind sent between two snapshots.
pub(crate) type Snapshot = BTreeMap<&'static str, (u64, Duration)>;

/// How many statements of each kind were sent between `from` and `to`.
pub(crate) fn between(from: &Snapshot, to: &Snapshot) -> Vec<(&'static str, u64)> {
    to.iter()
        .map(|(kind, (count, _))| {
            let before = from.get(kind).map_or(0, |(n, _)| *n);
            (*kind, count.saturating_sub(before))
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

fn classify(sql: &str) -> &'static str {
    let sql = sql.trim_start();
    if sql.starts_with("WITH candidates") {
        "claim (UPDATE … RETURNING)"
    } else if sql.contains("SET status = 1") {
        "complete"
    } else if sql.contains("SET status = CASE") {
        "fail"
    } else if sql.contains("SET lease_token = NULL") {
        "release"
    } else if sql.starts_with("UPDATE") && sql.contains("SET lease_expires_at") {
        "renew"
    } else if sql.contains("pg_notify") {
        "notify"
    } else if sql.starts_with("INSERT") && sql.contains("outbox_messages") {
        "insert outbox rows"
    } else if sql.starts_with("INSERT") {
        "insert (application)"
    } else {
        "other (stats, …)"
    }
}

/// Committed and rolled-back transactions of the current database so far.
/// Backends flush these counters when idle at most once a second, or when
/// they exit: close the pools being measured before reading the final value.
pub(crate) async fn transactions(admin: &DatabaseConnection) -> Result<(i64, i64), BoxError> {
    let row = admin
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = current_database()",
        ))
        .await?
        .ok_or("pg_stat_database has no row for this database")?;
    Ok((
        row.try_get("", "xact_commit")?,
        row.try_get("", "xact_rollback")?,
    ))
}

/// The `column` of the one row `sql` returns.
pub(crate) async fn scalar<T: sea_orm::TryGetable>(
    db: &DatabaseConnection,
    sql: impl Into<String>,
    column: &str,
) -> Result<T, BoxError> {
    let sql = sql.into();
    let row = db
        .query_one_raw(Statement::from_string(DbBackend::Postgres, sql.clone()))
        .await?
        .ok_or_else(|| format!("no row from `{sql}`"))?;
    Ok(row.try_get("", column)?)
}

/// Sessions on this database that are not the bench's.
pub(crate) async fn other_clients(admin: &DatabaseConnection) -> Result<i64, BoxError> {
    let sql = format!(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() \
         AND backend_type = 'client backend' AND application_name <> '{APPLICATION_NAME}'"
    );
    scalar(admin, sql, "n").await
}

/// Whether `pg_stat_statements` is loaded (it needs
/// `shared_preload_libraries`, hence a server restart, to be).
pub(crate) async fn pg_stat_statements(admin: &DatabaseConnection) -> Result<bool, BoxError> {
    let libs: String = scalar(
        admin,
        "SELECT current_setting('shared_preload_libraries') AS libs",
        "libs",
    )
    .await?;
    Ok(libs.contains("pg_stat_statements"))
}

/// Row-change counters and size of a schema's outbox table.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableStats {
    pub(crate) updates: i64,
    pub(crate) hot_updates: i64,
    pub(crate) deletes: i64,
    pub(crate) dead: i64,
    pub(crate) autovacuums: i64,
    pub(crate) bytes: i64,
}

impl TableStats {
    /// Row versions the table's updates and deletes left behind since
    /// `before` (each update or delete leaves one, HOT or not).
    pub(crate) fn dead_versions_since(&self, before: &Self) -> i64 {
        (self.updates - before.updates) + (self.deletes - before.deletes)
    }
}

impl std::fmt::Display for TableStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} row updates ({} HOT), {} dead rows, {} autovacuum runs, {:.0} MiB with indexes",
            self.updates,
            self.hot_updates,
            self.dead,
            self.autovacuums,
            self.bytes as f64 / 1048576.0
        )
    }
}

/// `pg_stat_user_tables` and the size of `schema.outbox_messages`.
pub(crate) async fn table_stats(
    admin: &DatabaseConnection,
    schema: &str,
) -> Result<TableStats, BoxError> {
    let row = admin
        .query_one_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT n_tup_upd, n_tup_hot_upd, n_tup_del, n_dead_tup, autovacuum_count, \
             pg_total_relation_size(relid) AS bytes \
             FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'outbox_messages'",
            [schema.into()],
        ))
        .await?
        .ok_or("no statistics for the outbox table")?;
    Ok(TableStats {
        updates: row.try_get("", "n_tup_upd")?,
        hot_updates: row.try_get("", "n_tup_hot_upd")?,
        deletes: row.try_get("", "n_tup_del")?,
        dead: row.try_get("", "n_dead_tup")?,
        autovacuums: row.try_get("", "autovacuum_count")?,
        bytes: row.try_get("", "bytes")?,
    })
}
