//! PostgreSQL's WAL each minute (`pg_stat_wal`, PostgreSQL 14-17): bytes
//! written, syncs and the time they took, so a dip of the writers can be
//! told apart from the pipeline's (a commit waits for its WAL sync). The
//! run's private server has `track_wal_io_timing` on from its start, so
//! the sync time is measured from the first minute; elsewhere it reads 0.

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use crate::harness::report::thousands;

/// `pg_stat_wal`'s counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Wal {
    /// WAL bytes generated.
    pub(crate) bytes: f64,
    /// `fsync`s (or `fdatasync`s) of WAL files.
    pub(crate) syncs: f64,
    /// Their time, in ms (0 without `track_wal_io_timing`).
    pub(crate) sync_ms: f64,
}

impl Wal {
    /// Reads them; `None` on MariaDB, or where `pg_stat_wal` has no such
    /// columns (PostgreSQL 18 moved them to `pg_stat_io`) or cannot be read.
    pub(crate) async fn read(db: &DatabaseConnection) -> Option<Self> {
        if db.get_database_backend() != DbBackend::Postgres {
            return None;
        }
        let row = db
            .query_one_raw(Statement::from_string(
                DbBackend::Postgres,
                "SELECT wal_bytes::float8 AS bytes, wal_sync::float8 AS syncs, \
                 wal_sync_time::float8 AS sync_ms FROM pg_stat_wal",
            ))
            .await
            .ok()??;
        Some(Self {
            bytes: row.try_get("", "bytes").ok()?,
            syncs: row.try_get("", "syncs").ok()?,
            sync_ms: row.try_get("", "sync_ms").ok()?,
        })
    }

    /// The line's part between two readings `secs` apart, e.g. `WAL 4.1
    /// MB/s, 1,020 syncs/s at 0.52 ms`.
    pub(crate) fn describe_since(&self, before: &Self, secs: f64) -> String {
        let syncs = (self.syncs - before.syncs).max(0.0);
        let each = if syncs > 0.0 {
            (self.sync_ms - before.sync_ms).max(0.0) / syncs
        } else {
            0.0
        };
        format!(
            "WAL {:.1} MB/s, {} syncs/s at {:.2} ms",
            (self.bytes - before.bytes).max(0.0) / 1e6 / secs,
            thousands(syncs / secs),
            each
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minute_of_wal_is_its_rate_and_the_mean_sync() {
        let before = Wal {
            bytes: 1e6,
            syncs: 100.0,
            sync_ms: 50.0,
        };
        let after = Wal {
            bytes: 241e6,
            syncs: 61_300.0,
            sync_ms: 50.0 + 61_200.0 * 0.52,
        };
        assert_eq!(
            after.describe_since(&before, 60.0),
            "WAL 4.0 MB/s, 1,020 syncs/s at 0.52 ms"
        );
        assert_eq!(
            before.describe_since(&before, 60.0),
            "WAL 0.0 MB/s, 0 syncs/s at 0.00 ms"
        );
    }
}
