//! `outbox migrate`: the shipped migrations, for the tables named by
//! `--table` and `--inbox-table`, recorded in `outbox_migrations`.

use std::sync::OnceLock;

use sea_orm_migration::sea_query::{Alias, IntoIden};
use sea_orm_migration::{MigrationTrait, MigratorTrait};
use txoutbox_sea_orm::OutboxConfig;
use txoutbox_sea_orm::migration::{MIGRATION_TABLE, migrations};

use crate::context::Context;
use crate::error::CliError;
use crate::render;

/// The tables `outbox migrate` was asked for (a migrator's migrations are
/// an associated function: they cannot take them as an argument).
static TABLES: OnceLock<OutboxConfig> = OnceLock::new();

/// The outbox's migrations for [`TABLES`], with their own history table.
struct Migrator;

#[sea_orm_migration::async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        migrations(TABLES.get_or_init(OutboxConfig::default))
    }

    fn migration_table_name() -> sea_orm::DynIden {
        Alias::new(MIGRATION_TABLE).into_iden()
    }
}

pub(super) async fn run(context: &Context) -> Result<(), CliError> {
    let outbox = context.outbox().await?;
    if TABLES.set(outbox.config().clone()).is_err() {
        return Err(CliError::Usage("migrate runs once per process".to_owned()));
    }
    let db = outbox.db();
    let failed = CliError::Migration;
    let pending = Migrator::get_pending_migrations(db).await.map_err(failed)?;
    if pending.is_empty() {
        print!(
            "{}",
            render::migrate::up_to_date(
                Migrator::migrations().len(),
                outbox.config().table(),
                outbox.config().inbox_table()
            )
        );
        return Ok(());
    }
    let names: Vec<String> = pending.iter().map(|m| m.name().to_owned()).collect();
    Migrator::up(db, None).await.map_err(failed)?;
    print!("{}", render::migrate::applied(&names));
    Ok(())
}
