//! The outbox and inbox tables as `sea-orm-migration` migrations (feature
//! `migration`): [`CreateOutboxTable`], [`CreateInboxTable`], then
//! [`AddQueueIndexes`], [`AddAbandonedClaims`], [`CreateHeldTable`] and
//! [`AddSkippedMessages`], [`CreateLeaseTable`], [`TuneStorage`]. A database migrated before a later migration
//! existed gets it by running the migrator again.
//!
//! Run [`OutboxMigrator`] on its own: it keeps its history in
//! `outbox_migrations`, so it never clashes with the application's
//! `seaql_migrations`:
//!
//! ```no_run
//! # async fn run(db: &sea_orm::DatabaseConnection) -> Result<(), sea_orm::DbErr> {
//! // `MigratorTrait` (which `up` belongs to) is re-exported here, so a
//! // service needs no `sea-orm-migration` dependency of its own to run it.
//! use txoutbox_sea_orm::migration::{MigratorTrait, OutboxMigrator};
//! OutboxMigrator::up(db, None).await?;
//! # Ok(()) }
//! ```
//!
//! Or add [`migrations`] to the application's own `Migrator` (for a custom
//! table name, pass its [`OutboxConfig`]).

/// The trait `OutboxMigrator::up`/`down`/`status` belong to, and the crate
/// it comes from (for `migrations()` in an application's own `Migrator`).
pub use sea_orm_migration::{self, MigratorTrait};

use sea_orm::ConnectionTrait;
use sea_orm_migration::sea_query::{Alias, IntoIden};
use sea_orm_migration::{DbErr, MigrationName, MigrationTrait, SchemaManager};

use crate::config::OutboxConfig;
use crate::dialect::Dialect;
use crate::schema::{
    abandoned_column, create_held, create_inbox, create_lease, create_outbox, drop_held,
    drop_inbox, drop_lease, drop_outbox, drop_skipped_columns, held_table, lease_table,
    queue_index_name, queue_indexes, reset_storage_settings, skipped_columns, storage_settings,
};

/// Where [`OutboxMigrator`] records which migrations ran.
pub const MIGRATION_TABLE: &str = "outbox_migrations";

/// The outbox's migrations for `config`'s tables, oldest first, to add to an
/// application's own `Migrator`.
pub fn migrations(config: &OutboxConfig) -> Vec<Box<dyn MigrationTrait>> {
    vec![
        Box::new(CreateOutboxTable::new(config)),
        Box::new(CreateInboxTable::new(config)),
        Box::new(AddQueueIndexes::new(config)),
        Box::new(AddAbandonedClaims::new(config)),
        Box::new(CreateHeldTable::new(config)),
        Box::new(AddSkippedMessages::new(config)),
        Box::new(CreateLeaseTable::new(config)),
        Box::new(TuneStorage::new(config)),
    ]
}

/// Creates the outbox table and its indexes.
#[derive(Debug, Clone)]
pub struct CreateOutboxTable {
    config: OutboxConfig,
    name: String,
}

impl CreateOutboxTable {
    /// The migration for `config`'s table.
    pub fn new(config: &OutboxConfig) -> Self {
        Self {
            name: format!("m20261123_000001_create_{}", config.table()),
            config: config.clone(),
        }
    }
}

impl MigrationName for CreateOutboxTable {
    fn name(&self) -> &str {
        &self.name
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for CreateOutboxTable {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = create_outbox(dialect(manager), self.config.table());
        execute_unless(
            manager,
            &self.name,
            Present::Table(self.config.table().as_str().to_owned()),
            statements,
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        execute(
            manager,
            [drop_outbox(dialect(manager), self.config.table())],
        )
        .await
    }
}

/// Creates the inbox table ([`Inbox`](crate::Inbox)) and its purge index.
#[derive(Debug, Clone)]
pub struct CreateInboxTable {
    config: OutboxConfig,
    name: String,
}

impl CreateInboxTable {
    /// The migration for `config`'s inbox table.
    pub fn new(config: &OutboxConfig) -> Self {
        Self {
            name: format!("m20261123_000002_create_{}", config.inbox_table()),
            config: config.clone(),
        }
    }
}

impl MigrationName for CreateInboxTable {
    fn name(&self) -> &str {
        &self.name
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for CreateInboxTable {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = create_inbox(dialect(manager), self.config.inbox_table());
        execute_unless(
            manager,
            &self.name,
            Present::Table(self.config.inbox_table().as_str().to_owned()),
            statements,
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        execute(
            manager,
            [drop_inbox(dialect(manager), self.config.inbox_table())],
        )
        .await
    }
}

/// The `abandoned` column: how many claims of a row ended without settling
/// it (a processor crashed, was killed or hung holding it); the processor
/// isolates such rows and sends one dead after
/// [`ABANDONED_LIMIT`](txoutbox_core::processor::ABANDONED_LIMIT) claims, so a
/// message that kills every processor handling it cannot crash-loop a
/// fleet.
#[derive(Debug, Clone)]
pub struct AddAbandonedClaims {
    config: OutboxConfig,
    name: String,
}

impl AddAbandonedClaims {
    /// The migration for `config`'s table.
    pub fn new(config: &OutboxConfig) -> Self {
        Self {
            name: format!("m20261124_000004_abandoned_{}", config.table()),
            config: config.clone(),
        }
    }
}

impl MigrationName for AddAbandonedClaims {
    fn name(&self) -> &str {
        &self.name
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for AddAbandonedClaims {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = [abandoned_column(dialect(manager), self.config.table())];
        execute_unless(
            manager,
            &self.name,
            Present::Column(self.config.table().as_str().to_owned(), "abandoned"),
            statements,
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statement = format!(
            "ALTER TABLE {} DROP COLUMN abandoned",
            dialect(manager).quote(self.config.table().as_str())
        );
        execute(manager, [statement]).await
    }
}

/// The indexes the claim's walk and `stats` need beyond the first schema:
/// on PostgreSQL and SQLite a partial index of dead rows (`stats` counts
/// them without reading pending ones); on MySQL/MariaDB
/// `(status, aggregate_type, aggregate_id, sequence)`, the walk's loose
/// index scan (also serving dead counts), replacing
/// `(aggregate_type, aggregate_id, status, sequence)`, whose ranges ran
/// through published rows.
#[derive(Debug, Clone)]
pub struct AddQueueIndexes {
    config: OutboxConfig,
    name: String,
}

impl AddQueueIndexes {
    /// The migration for `config`'s table.
    pub fn new(config: &OutboxConfig) -> Self {
        Self {
            name: format!("m20261124_000003_queue_indexes_{}", config.table()),
            config: config.clone(),
        }
    }
}

impl MigrationName for AddQueueIndexes {
    fn name(&self) -> &str {
        &self.name
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for AddQueueIndexes {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = queue_indexes(dialect(manager), self.config.table());
        execute_unless(
            manager,
            &self.name,
            Present::Index(
                self.config.table().as_str().to_owned(),
                queue_index_name(dialect(manager), self.config.table()),
            ),
            statements,
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let table = self.config.table().as_str();
        let q = |ident: &str| dialect(manager).quote(ident);
        let statements = match dialect(manager) {
            Dialect::MySql => vec![
                format!(
                    "CREATE INDEX {} ON {} (aggregate_type, aggregate_id, status, sequence)",
                    q(&format!("{table}_unpublished")),
                    q(table)
                ),
                format!(
                    "DROP INDEX {} ON {}",
                    q(&format!("{table}_heads")),
                    q(table)
                ),
            ],
            _ => vec![format!(
                "DROP INDEX IF EXISTS {}",
                q(&format!("{table}_dead"))
            )],
        };
        execute(manager, statements).await
    }
}

/// The held-messages table `<inbox>_held`: where an inbox consumer that keeps
/// order parks the messages of an aggregate held behind one it could not
/// apply, until an operator releases it ([`Inbox::release`](crate::Inbox::release)).
#[derive(Debug, Clone)]
pub struct CreateHeldTable {
    config: OutboxConfig,
    name: String,
}

impl CreateHeldTable {
    /// The migration for `config`'s inbox table.
    pub fn new(config: &OutboxConfig) -> Self {
        Self {
            name: format!("m20261124_000005_held_{}", config.inbox_table()),
            config: config.clone(),
        }
    }
}

impl MigrationName for CreateHeldTable {
    fn name(&self) -> &str {
        &self.name
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for CreateHeldTable {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = create_held(dialect(manager), self.config.inbox_table());
        execute_unless(
            manager,
            &self.name,
            Present::Table(held_table(self.config.inbox_table())),
            statements,
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        execute(
            manager,
            [drop_held(dialect(manager), self.config.inbox_table())],
        )
        .await
    }
}

/// The columns `skipped_at`, `skipped_by` and `skip_reason` and the index
/// `<table>_skipped`: a dead message an operator deliberately leaves
/// unpublished is kept with who, why and when
/// ([`OutboxAdmin::skip_dead`](txoutbox_core::store::OutboxAdmin::skip_dead)).
#[derive(Debug, Clone)]
pub struct AddSkippedMessages {
    config: OutboxConfig,
    name: String,
}

impl AddSkippedMessages {
    /// The migration for `config`'s table.
    pub fn new(config: &OutboxConfig) -> Self {
        Self {
            name: format!("m20261125_000006_skipped_{}", config.table()),
            config: config.clone(),
        }
    }
}

impl MigrationName for AddSkippedMessages {
    fn name(&self) -> &str {
        &self.name
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for AddSkippedMessages {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = skipped_columns(dialect(manager), self.config.table());
        execute_unless(
            manager,
            &self.name,
            Present::Column(self.config.table().as_str().to_owned(), "skipped_at"),
            statements,
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        execute(
            manager,
            drop_skipped_columns(dialect(manager), self.config.table()),
        )
        .await
    }
}

/// The reader-lease table `<inbox>_lease`: which process reads each
/// JetStream consumer of an inbox consumer that keeps order, until when by
/// the database's clock, with a fencing token.
#[derive(Debug, Clone)]
pub struct CreateLeaseTable {
    config: OutboxConfig,
    name: String,
}

impl CreateLeaseTable {
    /// The migration for `config`'s inbox table.
    pub fn new(config: &OutboxConfig) -> Self {
        Self {
            name: format!("m20261128_000007_lease_{}", config.inbox_table()),
            config: config.clone(),
        }
    }
}

impl MigrationName for CreateLeaseTable {
    fn name(&self) -> &str {
        &self.name
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for CreateLeaseTable {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statement = create_lease(dialect(manager), self.config.inbox_table());
        execute_unless(
            manager,
            &self.name,
            Present::Table(lease_table(self.config.inbox_table())),
            [statement],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        execute(
            manager,
            [drop_lease(dialect(manager), self.config.inbox_table())],
        )
        .await
    }
}

/// Storage settings for queue tables on PostgreSQL (nothing elsewhere):
/// autovacuum and analyze on the outbox and inbox tables once 2% of their
/// rows (plus 1,000) changed, not PostgreSQL's 20%. Each message leaves two
/// dead row versions (its claim and its completion) in a table that keeps a
/// week of published rows by default, so at 20% it would wait for about 17
/// hours of writes to be dead (at 2%, about 1.7 hours). `ALTER TABLE … SET`
/// takes a `SHARE UPDATE EXCLUSIVE` lock (reads and writes go on) and
/// rewrites nothing.
#[derive(Debug, Clone)]
pub struct TuneStorage {
    config: OutboxConfig,
    name: String,
}

impl TuneStorage {
    /// The migration for `config`'s tables.
    pub fn new(config: &OutboxConfig) -> Self {
        Self {
            name: format!("m20261128_000008_storage_{}", config.table()),
            config: config.clone(),
        }
    }
}

impl MigrationName for TuneStorage {
    fn name(&self) -> &str {
        &self.name
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for TuneStorage {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let (table, inbox) = (self.config.table(), self.config.inbox_table());
        execute(manager, storage_settings(dialect(manager), table, inbox)).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let (table, inbox) = (self.config.table(), self.config.inbox_table());
        execute(
            manager,
            reset_storage_settings(dialect(manager), table, inbox),
        )
        .await
    }
}

fn dialect(manager: &SchemaManager<'_>) -> Dialect {
    Dialect::of(manager.get_database_backend())
}

/// What a migration adds, by which it recognises a schema that already has
/// it: [`create_schema`](crate::create_schema) builds the latest schema at
/// once, so an application that started with it and moves to migrations
/// finds every change made.
enum Present {
    Table(String),
    Column(String, &'static str),
    Index(String, String),
}

/// Runs `statements` unless what they add is already `present`, in which
/// case the migration is recorded as run without repeating them (MySQL and
/// MariaDB have no `IF NOT EXISTS` for every statement, SQLite none for
/// columns).
async fn execute_unless(
    manager: &SchemaManager<'_>,
    migration: &str,
    present: Present,
    statements: impl IntoIterator<Item = String>,
) -> Result<(), DbErr> {
    let (there, what) = match &present {
        Present::Table(table) => (manager.has_table(table).await?, format!("table {table}")),
        Present::Column(table, column) => (
            manager.has_column(table, column).await?,
            format!("column {table}.{column}"),
        ),
        Present::Index(table, index) => (
            manager.has_index(table, index).await?,
            format!("index {index} on {table}"),
        ),
    };
    if there {
        tracing::info!(
            migration,
            "{what} is already there (built by create_schema?): nothing to do"
        );
        return Ok(());
    }
    execute(manager, statements).await
}

/// Runs `statements` in order on the migration's connection.
async fn execute(
    manager: &SchemaManager<'_>,
    statements: impl IntoIterator<Item = String>,
) -> Result<(), DbErr> {
    let db = manager.get_connection();
    for statement in statements {
        db.execute_unprepared(&statement).await?;
    }
    Ok(())
}

/// The outbox's own migrator, for the default table, with its own history
/// table ([`MIGRATION_TABLE`]).
#[derive(Debug, Clone, Copy)]
pub struct OutboxMigrator;

#[sea_orm_migration::async_trait::async_trait]
impl MigratorTrait for OutboxMigrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        migrations(&OutboxConfig::default())
    }

    fn migration_table_name() -> sea_orm::DynIden {
        Alias::new(MIGRATION_TABLE).into_iden()
    }
}
