//! What the database says of the outbox and inbox tables each minute:
//! PostgreSQL's sizes and `pg_stat_user_tables`, MariaDB's
//! `information_schema.TABLES` and InnoDB's history list length (the
//! server's, `Innodb_history_list_length`: every database's undo not yet
//! purged).

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use txoutbox_fixtures::TestDb;
use txoutbox_sea_orm::OutboxConfig;
use txoutbox_sea_orm::migration::TuneStorage;
use txoutbox_sea_orm::migration::sea_orm_migration::{MigrationTrait, SchemaManager};

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
    /// PostgreSQL: the share of the outbox table's updates that were
    /// heap-only (HOT: no index entry written), percent.
    pub(crate) hot_percent: i64,
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
                "outbox heap {} idx {} live {} dead {} autovac {} HOT {}%; inbox {}",
                mb(self.heap),
                mb(self.index),
                self.live,
                self.dead_or_free,
                self.vacuums_or_history,
                self.hot_percent,
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
             (100 * n_tup_hot_upd / greatest(n_tup_upd, 1))::bigint AS hot, \
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
        hot_percent: row.try_get("", "hot")?,
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
        hot_percent: 0,
    })
}

/// Gives the run's outbox and inbox tables PostgreSQL's default storage
/// settings again (`--table-defaults`): undoes the migration that tunes
/// them ([`TuneStorage`]), to measure what it is worth. Nothing on MariaDB.
pub(crate) async fn reset_storage(test: &TestDb) -> Result<(), BoxError> {
    let manager = SchemaManager::new(&test.db);
    TuneStorage::new(&OutboxConfig::default())
        .down(&manager)
        .await?;
    Ok(())
}

/// Fills the run's outbox table with `rows` published messages (100 per
/// aggregate of type `history`, published now), then vacuums and analyzes
/// it, as a table that kept its history would be. PostgreSQL only.
pub(crate) async fn fill_history(test: &TestDb, rows: u64) -> Result<(), BoxError> {
    if test.db.get_database_backend() != DbBackend::Postgres {
        return Err("endurance: --history is for PostgreSQL".into());
    }
    let started = std::time::Instant::now();
    test.db
        .execute_unprepared(&format!(
            "INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, sequence, event_name, \
             event_version, subject, payload, correlation_id, occurred_at, created_at, status, \
             attempts, next_attempt_at, published_at, stream_sequence) \
             SELECT gen_random_uuid(), 'history', 'h-' || (g / 100), g % 100 + 1, 'history.kept', \
             1, 'history.kept', '{{\"n\": 1, \"note\": \"a published message the cleanup keeps\"}}', \
             gen_random_uuid()::text, now(), now(), 1, 1, now(), now(), g \
             FROM generate_series(0, {last}) AS g",
            last = rows.saturating_sub(1)
        ))
        .await?;
    test.db
        .execute_unprepared("VACUUM ANALYZE outbox_messages")
        .await?;
    println!(
        "history: {rows} published rows in the outbox table ({:.0} s)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
