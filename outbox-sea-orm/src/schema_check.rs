//! Whether a table is there with every column this version reads: the
//! processor's check of the outbox table at start
//! ([`OutboxStore::check_schema`](txoutbox_core::OutboxStore::check_schema))
//! and [`Inbox::check_table`](crate::Inbox::check_table). A missing table or
//! column is a [`MissingSchema`] naming what to run.

use sea_orm::{ConnectionTrait, DatabaseConnection};
use txoutbox_core::store::MissingSchema;

use crate::config::TableName;
use crate::dialect::Dialect;
use crate::error::OutboxError;

/// The migration (by its name's start: the table's name follows) that
/// added each group of columns.
pub(crate) struct Columns<'a> {
    /// The migration that creates the table.
    pub(crate) created_by: &'a str,
    /// Column groups, each with the migration that added it.
    pub(crate) groups: &'a [(&'a str, &'a [&'a str])],
}

/// The outbox table's columns, by the migration that added them.
pub(crate) const OUTBOX: Columns<'static> = Columns {
    created_by: "m20261123_000001_create_",
    groups: &[
        (
            "m20261123_000001_create_",
            &[
                "id",
                "aggregate_type",
                "aggregate_id",
                "sequence",
                "event_name",
                "event_version",
                "subject",
                "payload",
                "headers",
                "correlation_id",
                "causation_id",
                "tenant",
                "traceparent",
                "occurred_at",
                "created_at",
                "status",
                "attempts",
                "next_attempt_at",
                "lease_token",
                "lease_expires_at",
                "last_error",
                "published_at",
                "stream_sequence",
            ],
        ),
        ("m20261124_000004_abandoned_", &["abandoned"]),
        (
            "m20261125_000006_skipped_",
            &["skipped_at", "skipped_by", "skip_reason"],
        ),
    ],
};

/// The inbox table's columns.
pub(crate) const INBOX: Columns<'static> = Columns {
    created_by: "m20261123_000002_create_",
    groups: &[(
        "m20261123_000002_create_",
        &["consumer", "message_id", "event_name", "processed_at"],
    )],
};

/// The held-messages table's columns (its migration is named after the
/// inbox table, not after `<inbox>_held`).
pub(crate) const HELD: Columns<'static> = Columns {
    created_by: "m20261124_000005_held_",
    groups: &[(
        "m20261124_000005_held_",
        &[
            "consumer",
            "message_id",
            "aggregate_type",
            "aggregate_id",
            "stream_sequence",
            "event_name",
            "subject",
            "headers",
            "payload",
            "reason",
            "release_as",
            "parked_at",
        ],
    )],
};

/// The reader-lease table's columns (its migration is named after the
/// inbox table).
pub(crate) const LEASE: Columns<'static> = Columns {
    created_by: "m20261128_000007_lease_",
    groups: &[(
        "m20261128_000007_lease_",
        &["consumer", "holder", "token", "expires_at"],
    )],
};

const HOW_TO_MIGRATE: &str = "run the outbox migrations: `outbox migrate` (the command), \
     `OutboxMigrator::up` (txoutbox_sea_orm::migration) or your own migrator with \
     `txoutbox_sea_orm::migration::migrations`";

/// Checks that `table` exists with `columns`; `migration_table` is the
/// table the migrations are named after (the inbox's for its held table).
/// `Err(OutboxError::MissingSchema)` when something is missing, another
/// error when the database could not answer.
pub(crate) async fn check(
    db: &DatabaseConnection,
    table: &str,
    migration_table: &TableName,
    columns: &Columns<'_>,
) -> Result<(), OutboxError> {
    let dialect = Dialect::of(db.get_database_backend());
    // SQLite reads a double-quoted name that is no column as a string
    // literal, so a probe of a missing column would succeed: backticks are
    // always names there.
    let q = |ident: &str| match dialect {
        Dialect::Sqlite => format!("`{}`", ident.replace('`', "``")),
        _ => dialect.quote(ident),
    };
    let probe = |select: &str| format!("SELECT {select} FROM {} WHERE 1 = 0", q(table));
    if let Err(err) = db.execute_unprepared(&probe("1")).await {
        // The table cannot be read: missing, unless the database itself
        // cannot answer.
        db.execute_unprepared("SELECT 1").await?;
        tracing::debug!(table, error = %err, "outbox schema check: table missing");
        return Err(OutboxError::MissingSchema(MissingSchema::Table {
            table: table.to_owned(),
            remedy: format!(
                "create it ({}{migration_table}): {HOW_TO_MIGRATE}, or \
                 `txoutbox_sea_orm::create_schema`; or name your table in `OutboxConfig`",
                columns.created_by
            ),
        }));
    }
    let all: Vec<&str> = columns
        .groups
        .iter()
        .flat_map(|(_, names)| names.iter().copied())
        .collect();
    let quoted: Vec<String> = all.iter().map(|c| q(c)).collect();
    let Err(err) = db.execute_unprepared(&probe(&quoted.join(", "))).await else {
        return Ok(());
    };
    // Which ones (only on this failure path: one probe per column).
    let mut missing = Vec::new();
    let mut migrations = Vec::new();
    for (migration, names) in columns.groups {
        for name in *names {
            if db.execute_unprepared(&probe(&q(name))).await.is_err() {
                missing.push((*name).to_owned());
                let migration = format!("`{migration}{migration_table}`");
                if !migrations.contains(&migration) {
                    migrations.push(migration);
                }
            }
        }
    }
    if missing.is_empty() {
        return Err(err.into());
    }
    Err(OutboxError::MissingSchema(MissingSchema::Columns {
        table: table.to_owned(),
        columns: missing,
        remedy: format!(
            "an older schema, without migration {}: {HOW_TO_MIGRATE}",
            migrations.join(", ")
        ),
    }))
}
