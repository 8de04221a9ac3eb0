//! What the database says of the outbox and inbox tables each minute:
//! PostgreSQL's sizes and `pg_stat_user_tables`, MariaDB's
//! `information_schema.TABLES` and InnoDB's history list length (the
//! server's, `Innodb_history_list_length`: every database's undo not yet
//! purged).

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use crate::harness::error::BoxError;

/// The tables' figures at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tables {
    /// `outbox_messages` heap bytes (PostgreSQL) or `data_length` (MariaDB).
    pub(crate) heap: i64,
    /// Its index bytes (`index_length` on MariaDB).
    pub(crate) index: i64,
    /// Live tuples (`table_rows`, an estimate, on MariaDB).
    pub(crate) live: i64,
    /// PostgreSQL: dead tuples and autovacuum runs so far. MariaDB:
    /// `data_free` bytes and the InnoDB history list length.
    pub(crate) dead_or_free: i64,
    pub(crate) vacuums_or_history: i64,
    /// The inbox table's bytes (heap and indexes).
    pub(crate) inbox: i64,
}

impl Tables {
    /// Reads them on `db` (its schema or database being the run's).
    pub(crate) async fn read(db: &DatabaseConnection) -> Result<Self, BoxError> {
        match db.get_database_backend() {
            DbBackend::Postgres => postgres(db).await,
            _ => mariadb(db).await,
        }
    }

    /// `outbox_messages` heap and index bytes together.
    pub(crate) fn outbox_bytes(&self) -> i64 {
        self.heap + self.index
    }

    /// The line's part, e.g. `outbox heap 12.1 MB idx 20.3 MB live 30,000
    /// dead 1,200 autovac 3; inbox 8.2 MB`.
    pub(crate) fn describe(&self, backend: DbBackend) -> String {
        let mb = |b: i64| format!("{:.1} MB", b as f64 / 1e6);
        match backend {
            DbBackend::Postgres => format!(
                "outbox heap {} idx {} live {} dead {} autovac {}; inbox {}",
                mb(self.heap),
                mb(self.index),
                self.live,
                self.dead_or_free,
                self.vacuums_or_history,
                mb(self.inbox)
            ),
            _ => format!(
                "outbox data {} idx {} free {} rows~{} history {}; inbox {}",
                mb(self.heap),
                mb(self.index),
                mb(self.dead_or_free),
                self.live,
                self.vacuums_or_history,
                mb(self.inbox)
            ),
        }
    }
}

async fn postgres(db: &DatabaseConnection) -> Result<Tables, BoxError> {
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT pg_relation_size(relid) AS heap, pg_indexes_size(relid) AS index, \
             n_live_tup AS live, n_dead_tup AS dead, autovacuum_count AS vacuums, \
             pg_total_relation_size('outbox_inbox'::regclass) AS inbox \
             FROM pg_stat_user_tables WHERE relid = 'outbox_messages'::regclass",
        ))
        .await?
        .ok_or("no statistics for outbox_messages")?;
    Ok(Tables {
        heap: row.try_get("", "heap")?,
        index: row.try_get("", "index")?,
        live: row.try_get("", "live")?,
        dead_or_free: row.try_get("", "dead")?,
        vacuums_or_history: row.try_get("", "vacuums")?,
        inbox: row.try_get("", "inbox")?,
    })
}

async fn mariadb(db: &DatabaseConnection) -> Result<Tables, BoxError> {
    let sizes = |table: &str| {
        format!(
            "SELECT CAST(data_length AS SIGNED) AS heap, CAST(index_length AS SIGNED) AS idx, \
             CAST(data_free AS SIGNED) AS free, CAST(table_rows AS SIGNED) AS live \
             FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = '{table}'"
        )
    };
    let query = |sql: String| Statement::from_string(DbBackend::MySql, sql);
    let outbox = db
        .query_one_raw(query(sizes("outbox_messages")))
        .await?
        .ok_or("no information_schema.TABLES row for outbox_messages")?;
    let inbox = db
        .query_one_raw(query(sizes("outbox_inbox")))
        .await?
        .ok_or("no information_schema.TABLES row for outbox_inbox")?;
    let history = db
        .query_one_raw(query(
            "SELECT CAST(variable_value AS SIGNED) AS n FROM information_schema.GLOBAL_STATUS \
             WHERE variable_name = 'INNODB_HISTORY_LIST_LENGTH'"
                .to_owned(),
        ))
        .await?
        .ok_or("no Innodb_history_list_length")?
        .try_get("", "n")?;
    Ok(Tables {
        heap: outbox.try_get("", "heap")?,
        index: outbox.try_get("", "idx")?,
        live: outbox.try_get("", "live")?,
        dead_or_free: outbox.try_get("", "free")?,
        vacuums_or_history: history,
        inbox: inbox.try_get::<i64>("", "heap")? + inbox.try_get::<i64>("", "idx")?,
    })
}
