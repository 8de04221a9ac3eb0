//! The outbox table and its indexes, per backend.
//!
//! | column | PostgreSQL | MySQL/MariaDB | SQLite |
//! |---|---|---|---|
//! | `id` (UUIDv7, primary key) | `uuid` | `BINARY(16)` | `BLOB` |
//! | `aggregate_type`, `aggregate_id`, `sequence` | text, text, `bigint` | | |
//! | `event_name`, `event_version`, `subject` | | | |
//! | `payload` | `jsonb` | `JSON` | `TEXT` |
//! | `headers` (application headers and the `tracestate`, JSON object or NULL) | `jsonb` | `JSON` | `TEXT` |
//! | `correlation_id`, `causation_id`, `tenant`, `traceparent` | | | |
//! | `occurred_at`, `created_at`, `next_attempt_at`, `lease_expires_at`, `published_at` | `timestamptz` | `DATETIME(6)` (UTC) | `TEXT` (UTC) |
//! | `status` | 0 pending, 1 published, 2 dead | | |
//! | `attempts`, `last_error`, `lease_token`, `stream_sequence` | | | |
//! | `abandoned` (claims that ended without a settlement) | integer | integer | integer |
//! | `skipped_at`, `skipped_by`, `skip_reason` (a dead message an operator skipped, from migration `m20261125_000006`) | `timestamptz`, `varchar(255)`, text | `DATETIME(6)`, `VARCHAR(255)`, `TEXT` | `TEXT` |
//!
//! A skipped message is settled without a publish: `status` 1 (so to the
//! claim, its walk index and the purge it is as done as a published one,
//! and its aggregate moves on), `published_at` the time of the skip,
//! `stream_sequence` NULL, and `skipped_at` set.
//!
//! Indexes:
//! - `<table>_pending`: the claim's scan. PostgreSQL and SQLite: a partial
//!   index on `id` of pending rows only, so millions of published rows cost
//!   the claim nothing. MySQL/MariaDB have no partial indexes: `(status, id)`
//!   keeps pending rows in one contiguous range instead.
//! - `<table>_aggregate`: unique `(aggregate_type, aggregate_id, sequence)`,
//!   per-aggregate order, and no two messages with one sequence.
//! - `<table>_unpublished` (PostgreSQL, SQLite): partial on unpublished rows,
//!   `(aggregate_type, aggregate_id, sequence)`: the claim's walk over the
//!   aggregates (one probe per aggregate finds its head) and its "is an
//!   earlier message unpublished" probe. Published rows are not in it, so a
//!   long history costs the claim nothing.
//! - `<table>_heads` (MySQL/MariaDB, from migration `m20261124_000003`):
//!   `(status, aggregate_type, aggregate_id, sequence)`, so pending rows are
//!   in aggregate order apart from published ones and the walk is a loose
//!   index scan. It replaces the first schema's `<table>_unpublished`
//!   `(aggregate_type, aggregate_id, status, sequence)`, whose ranges ran
//!   through published rows.
//! - `<table>_published`: the purge's scan of old published rows.
//! - `<table>_dead` (PostgreSQL, SQLite, from migration `m20261124_000003`):
//!   partial on dead rows, `(event_name)`: `stats` counts dead messages
//!   without reading pending ones (MySQL/MariaDB count them on
//!   `<table>_heads`).
//!
//! The inbox table (default `outbox_inbox`, see [`Inbox`](crate::Inbox)):
//!
//! | column | PostgreSQL | MySQL/MariaDB | SQLite |
//! |---|---|---|---|
//! | `consumer` (primary key, with `message_id`) | `varchar(128)` | `VARCHAR(128)` | `TEXT` |
//! | `message_id` | `uuid` | `BINARY(16)` | `BLOB` |
//! | `event_name` | `varchar(128)` | `VARCHAR(128)` | `TEXT` |
//! | `processed_at` | `timestamptz` | `DATETIME(6)` (UTC) | `TEXT` (UTC) |
//!
//! Index `<inbox>_processed` on `(consumer, processed_at)`: the purge's scan.
//!
//! The held-messages table `<inbox>_held` (from migration
//! `m20261124_000005`): messages an inbox consumer parked because their
//! aggregate is held behind one it could not apply (see
//! [`Inbox::holds`](crate::Inbox::holds)). Primary key `(consumer,
//! message_id)`; `aggregate_type`, `aggregate_id`, `stream_sequence`,
//! `event_name`, `subject`, `headers` (JSON array of `[name, value]`),
//! `payload` (bytes as delivered), `reason` (set on the message the
//! aggregate is held behind), `release_as` (`retry` or `skip` once an
//! operator released it), `parked_at` (on the message an aggregate is held
//! behind: since when it is held). Index `<inbox>_held_order` on
//! `(consumer, aggregate_type, aggregate_id, stream_sequence)`.
//!
//! The reader-lease table `<inbox>_lease` (from migration
//! `m20261128_000007`): which process reads each JetStream consumer of an
//! inbox consumer that keeps order (see the subscriber's reader lease in
//! `txoutbox_nats`). Primary key `consumer` (the JetStream consumer's
//! name, `varchar(255)`); `holder` (`varchar(255)`), `token` (the fencing
//! token, `bigint`), `expires_at` (by the database's clock, the inbox's
//! time type).
//!
//! Storage settings (PostgreSQL, from migration `m20261128_000008`): the
//! outbox and inbox tables are vacuumed and analyzed once 2% of their rows
//! (plus 1,000) changed, not PostgreSQL's 20%: with a week of published
//! rows kept (the cleanup's default), 20% is days of dead row versions. The
//! guide's performance chapter has what only an operator can set.

use crate::config::TableName;
use crate::dialect::Dialect;

/// The statements that create the outbox table and its indexes.
pub(crate) fn create_outbox(dialect: Dialect, table: &TableName) -> Vec<String> {
    let t = table.as_str();
    let q = |ident: &str| dialect.quote(ident);
    let (uuid, text, big, json, time) = match dialect {
        // `jsonb`: payloads can be queried and indexed in place; PostgreSQL
        // hands them back normalized (key order, spacing), equal as JSON.
        Dialect::Postgres => ("uuid", "varchar", "bigint", "jsonb", "timestamptz"),
        Dialect::MySql => ("BINARY(16)", "VARCHAR", "BIGINT", "JSON", "DATETIME(6)"),
        Dialect::Sqlite => ("BLOB", "TEXT", "INTEGER", "TEXT", "TEXT"),
    };
    let sized = |len: u32| match dialect {
        Dialect::Sqlite => text.to_owned(),
        _ => format!("{text}({len})"),
    };
    let long_text = match dialect {
        Dialect::MySql => "TEXT",
        _ => "text",
    };
    let mut statements = vec![format!(
        "CREATE TABLE IF NOT EXISTS {table} (
    id {uuid} NOT NULL PRIMARY KEY,
    aggregate_type {s128} NOT NULL,
    aggregate_id {s255} NOT NULL,
    sequence {big} NOT NULL,
    event_name {s128} NOT NULL,
    event_version integer NOT NULL,
    subject {s255} NOT NULL,
    payload {json} NOT NULL,
    headers {json} NULL,
    correlation_id {s255} NOT NULL,
    causation_id {s255} NULL,
    tenant {s255} NULL,
    traceparent {s64} NULL,
    occurred_at {time} NOT NULL,
    created_at {time} NOT NULL,
    status smallint NOT NULL DEFAULT 0,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at {time} NOT NULL,
    lease_token {uuid} NULL,
    lease_expires_at {time} NULL,
    last_error {long_text} NULL,
    published_at {time} NULL,
    stream_sequence {big} NULL
)",
        table = q(t),
        s128 = sized(128),
        s255 = sized(255),
        s64 = sized(64),
    )];
    let index = |suffix: &str, unique: bool, columns: &str, filter: Option<&str>| {
        let filter = filter.map(|f| format!(" WHERE {f}")).unwrap_or_default();
        let unique = if unique { "UNIQUE " } else { "" };
        let if_not_exists = dialect.index_if_not_exists();
        format!(
            "CREATE {unique}INDEX {if_not_exists}{name} ON {table} ({columns}){filter}",
            name = q(&format!("{t}_{suffix}")),
            table = q(t),
        )
    };
    match dialect {
        Dialect::Postgres | Dialect::Sqlite => {
            statements.push(index("pending", false, "id", Some("status = 0")));
            statements.push(index(
                "unpublished",
                false,
                "aggregate_type, aggregate_id, sequence",
                Some("status <> 1"),
            ));
            statements.push(index(
                "published",
                false,
                "published_at",
                Some("status = 1"),
            ));
        }
        Dialect::MySql => {
            statements.push(index("pending", false, "status, id", None));
            statements.push(index(
                "unpublished",
                false,
                "aggregate_type, aggregate_id, status, sequence",
                None,
            ));
            statements.push(index("published", false, "status, published_at", None));
        }
    }
    statements.push(index(
        "aggregate",
        true,
        "aggregate_type, aggregate_id, sequence",
        None,
    ));
    statements
}

/// The indexes of migration `m20261124_000003` (see the module docs):
/// `<table>_dead` for `stats`, and on MySQL/MariaDB `<table>_heads`, which
/// replaces `<table>_unpublished`.
/// The index [`queue_indexes`] creates: `<table>_heads` on MySQL/MariaDB,
/// `<table>_dead` on the others.
#[cfg(feature = "migration")]
pub(crate) fn queue_index_name(dialect: Dialect, table: &TableName) -> String {
    match dialect {
        Dialect::MySql => format!("{table}_heads"),
        _ => format!("{table}_dead"),
    }
}

pub(crate) fn queue_indexes(dialect: Dialect, table: &TableName) -> Vec<String> {
    let t = table.as_str();
    let q = |ident: &str| dialect.quote(ident);
    match dialect {
        Dialect::Postgres | Dialect::Sqlite => vec![format!(
            "CREATE INDEX IF NOT EXISTS {name} ON {table} (event_name) WHERE status = 2",
            name = q(&format!("{t}_dead")),
            table = q(t),
        )],
        Dialect::MySql => vec![
            format!(
                "CREATE INDEX {name} ON {table} (status, aggregate_type, aggregate_id, sequence)",
                name = q(&format!("{t}_heads")),
                table = q(t),
            ),
            format!(
                "DROP INDEX {name} ON {table}",
                name = q(&format!("{t}_unpublished")),
                table = q(t),
            ),
        ],
    }
}

/// The column of migration `m20261124_000004`: `abandoned`, how many claims
/// of the row ended without settling it (their lease ran out: the processor
/// crashed, was killed or hung while holding it). The processor isolates
/// such rows and sends one dead after
/// [`ABANDONED_LIMIT`](txoutbox_core::processor::ABANDONED_LIMIT) claims.
pub(crate) fn abandoned_column(dialect: Dialect, table: &TableName) -> String {
    let if_not_exists = if dialect == Dialect::Postgres {
        "IF NOT EXISTS "
    } else {
        ""
    };
    format!(
        "ALTER TABLE {table} ADD COLUMN {if_not_exists}abandoned integer NOT NULL DEFAULT 0",
        table = dialect.quote(table.as_str())
    )
}

/// The columns and index of migration `m20261125_000006`: `skipped_at`,
/// `skipped_by`, `skip_reason` (a dead message an operator deliberately left
/// unpublished, see [`OutboxAdmin::skip_dead`](txoutbox_core::store::OutboxAdmin::skip_dead))
/// and the index `<table>_skipped`.
pub(crate) fn skipped_columns(dialect: Dialect, table: &TableName) -> Vec<String> {
    let t = table.as_str();
    let q = |ident: &str| dialect.quote(ident);
    let (time, by, reason) = match dialect {
        Dialect::Postgres => ("timestamptz", "varchar(255)", "text"),
        Dialect::MySql => ("DATETIME(6)", "VARCHAR(255)", "TEXT"),
        Dialect::Sqlite => ("TEXT", "TEXT", "TEXT"),
    };
    let if_not_exists = if dialect == Dialect::Postgres {
        "IF NOT EXISTS "
    } else {
        ""
    };
    let mut statements: Vec<String> = [
        ("skipped_at", time),
        ("skipped_by", by),
        ("skip_reason", reason),
    ]
    .iter()
    .map(|(column, kind)| {
        format!(
            "ALTER TABLE {table} ADD COLUMN {if_not_exists}{column} {kind} NULL",
            table = q(t)
        )
    })
    .collect();
    let name = q(&format!("{t}_skipped"));
    statements.push(match dialect {
        Dialect::MySql => format!("CREATE INDEX {name} ON {table} (skipped_at)", table = q(t)),
        _ => format!(
            "CREATE INDEX IF NOT EXISTS {name} ON {table} (skipped_at) WHERE skipped_at IS NOT NULL",
            table = q(t)
        ),
    });
    statements
}

/// The statements that drop what [`skipped_columns`] adds.
#[cfg(feature = "migration")]
pub(crate) fn drop_skipped_columns(dialect: Dialect, table: &TableName) -> Vec<String> {
    let t = table.as_str();
    let q = |ident: &str| dialect.quote(ident);
    let name = q(&format!("{t}_skipped"));
    let mut statements = vec![match dialect {
        Dialect::MySql => format!("DROP INDEX {name} ON {}", q(t)),
        _ => format!("DROP INDEX IF EXISTS {name}"),
    }];
    for column in ["skip_reason", "skipped_by", "skipped_at"] {
        statements.push(format!("ALTER TABLE {} DROP COLUMN {column}", q(t)));
    }
    statements
}

/// The statements that create the inbox table and its index.
pub(crate) fn create_inbox(dialect: Dialect, table: &TableName) -> Vec<String> {
    let t = table.as_str();
    let q = |ident: &str| dialect.quote(ident);
    let (uuid, name, time) = match dialect {
        Dialect::Postgres => ("uuid", "varchar(128)", "timestamptz"),
        Dialect::MySql => ("BINARY(16)", "VARCHAR(128)", "DATETIME(6)"),
        Dialect::Sqlite => ("BLOB", "TEXT", "TEXT"),
    };
    let if_not_exists = dialect.index_if_not_exists();
    vec![
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (
    consumer {name} NOT NULL,
    message_id {uuid} NOT NULL,
    event_name {name} NOT NULL,
    processed_at {time} NOT NULL,
    PRIMARY KEY (consumer, message_id)
)",
            table = q(t),
        ),
        format!(
            "CREATE INDEX {if_not_exists}{index} ON {table} (consumer, processed_at)",
            index = q(&format!("{t}_processed")),
            table = q(t),
        ),
    ]
}

/// The name of the table where inbox consumers park held aggregates'
/// messages: `<inbox>_held`.
pub(crate) fn held_table(inbox: &TableName) -> String {
    format!("{inbox}_held")
}

/// The statements that create the held-messages table (`<inbox>_held`) and
/// its index.
pub(crate) fn create_held(dialect: Dialect, inbox: &TableName) -> Vec<String> {
    let t = held_table(inbox);
    let q = |ident: &str| dialect.quote(ident);
    let (uuid, s128, s255, big, long_text, bytes, time) = match dialect {
        Dialect::Postgres => (
            "uuid",
            "varchar(128)",
            "varchar(255)",
            "bigint",
            "text",
            "bytea",
            "timestamptz",
        ),
        Dialect::MySql => (
            "BINARY(16)",
            "VARCHAR(128)",
            "VARCHAR(255)",
            "BIGINT",
            "TEXT",
            "LONGBLOB",
            "DATETIME(6)",
        ),
        Dialect::Sqlite => ("BLOB", "TEXT", "TEXT", "INTEGER", "TEXT", "BLOB", "TEXT"),
    };
    let if_not_exists = dialect.index_if_not_exists();
    vec![
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (
    consumer {s128} NOT NULL,
    message_id {uuid} NOT NULL,
    aggregate_type {s128} NOT NULL,
    aggregate_id {s255} NOT NULL,
    stream_sequence {big} NOT NULL,
    event_name {s128} NOT NULL,
    subject {s255} NOT NULL,
    headers {long_text} NOT NULL,
    payload {bytes} NOT NULL,
    reason {long_text} NULL,
    release_as {s128} NULL,
    parked_at {time} NOT NULL,
    PRIMARY KEY (consumer, message_id)
)",
            table = q(&t),
        ),
        format!(
            "CREATE INDEX {if_not_exists}{index} ON {table} \
             (consumer, aggregate_type, aggregate_id, stream_sequence)",
            index = q(&format!("{t}_order")),
            table = q(&t),
        ),
    ]
}

/// PostgreSQL's autovacuum settings for a queue table (from migration
/// `m20261128_000008`): vacuumed once 2% of it (plus 1,000 rows) is dead,
/// not PostgreSQL's 20%, and analyzed as often. Each message leaves two
/// dead row versions (its claim and its completion) while the table keeps a
/// week of published rows (the cleanup's default): at 20% a table of 7 days
/// waits for 1.4 days' worth of messages to be dead, about 17 hours of
/// writes (at 2%, about 1.7 hours).
const QUEUE_AUTOVACUUM: &str = "autovacuum_vacuum_scale_factor = 0.02, \
     autovacuum_vacuum_threshold = 1000, autovacuum_analyze_scale_factor = 0.02";

/// The settings [`QUEUE_AUTOVACUUM`] names, for `RESET`.
#[cfg(feature = "migration")]
const QUEUE_AUTOVACUUM_NAMES: &str = "autovacuum_vacuum_scale_factor, \
     autovacuum_vacuum_threshold, autovacuum_analyze_scale_factor";

/// The storage settings of migration `m20261128_000008` (PostgreSQL; none
/// elsewhere): both queue tables' autovacuum settings.
pub(crate) fn storage_settings(
    dialect: Dialect,
    table: &TableName,
    inbox: &TableName,
) -> Vec<String> {
    alter_queue_tables(
        dialect,
        [table, inbox],
        &format!("SET ({QUEUE_AUTOVACUUM})"),
    )
}

/// Undoes [`storage_settings`]: PostgreSQL's defaults again.
#[cfg(feature = "migration")]
pub(crate) fn reset_storage_settings(
    dialect: Dialect,
    table: &TableName,
    inbox: &TableName,
) -> Vec<String> {
    alter_queue_tables(
        dialect,
        [table, inbox],
        &format!("RESET ({QUEUE_AUTOVACUUM_NAMES})"),
    )
}

/// `ALTER TABLE <each> <change>` on PostgreSQL; nothing elsewhere.
fn alter_queue_tables(dialect: Dialect, tables: [&TableName; 2], change: &str) -> Vec<String> {
    if dialect != Dialect::Postgres {
        return Vec::new();
    }
    tables
        .iter()
        .map(|table| format!("ALTER TABLE {} {change}", dialect.quote(table.as_str())))
        .collect()
}

/// The name of the table where inbox consumers keep their reader leases:
/// `<inbox>_lease`.
pub(crate) fn lease_table(inbox: &TableName) -> String {
    format!("{inbox}_lease")
}

/// The statement that creates the reader-lease table (`<inbox>_lease`).
pub(crate) fn create_lease(dialect: Dialect, inbox: &TableName) -> String {
    let (s255, big, time) = match dialect {
        Dialect::Postgres => ("varchar(255)", "bigint", "timestamptz"),
        Dialect::MySql => ("VARCHAR(255)", "BIGINT", "DATETIME(6)"),
        Dialect::Sqlite => ("TEXT", "INTEGER", "TEXT"),
    };
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
    consumer {s255} NOT NULL,
    holder {s255} NOT NULL,
    token {big} NOT NULL,
    expires_at {time} NOT NULL,
    PRIMARY KEY (consumer)
)",
        table = dialect.quote(&lease_table(inbox)),
    )
}

/// The statement that drops the reader-lease table.
#[cfg(feature = "migration")]
pub(crate) fn drop_lease(dialect: Dialect, inbox: &TableName) -> String {
    format!(
        "DROP TABLE IF EXISTS {}",
        dialect.quote(&lease_table(inbox))
    )
}

/// The statement that drops the held-messages table.
#[cfg(feature = "migration")]
pub(crate) fn drop_held(dialect: Dialect, inbox: &TableName) -> String {
    format!("DROP TABLE IF EXISTS {}", dialect.quote(&held_table(inbox)))
}

/// The statement that drops the inbox table.
#[cfg(feature = "migration")]
pub(crate) fn drop_inbox(dialect: Dialect, table: &TableName) -> String {
    drop_outbox(dialect, table)
}

/// The statement that drops the outbox table.
#[cfg(feature = "migration")]
pub(crate) fn drop_outbox(dialect: Dialect, table: &TableName) -> String {
    format!("DROP TABLE IF EXISTS {}", dialect.quote(table.as_str()))
}

/// Creates the outbox table, the inbox table and their indexes if they do
/// not exist (what the migrations run; handy for tests and tools that do not
/// use migrations).
pub async fn create_schema(
    db: &impl sea_orm::ConnectionTrait,
    config: &crate::OutboxConfig,
) -> Result<(), sea_orm::DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let inbox = create_inbox(dialect, config.inbox_table())
        .into_iter()
        .chain(create_held(dialect, config.inbox_table()))
        .chain([create_lease(dialect, config.inbox_table())]);
    for statement in create_outbox(dialect, config.table())
        .into_iter()
        .chain(queue_indexes(dialect, config.table()))
        .chain([abandoned_column(dialect, config.table())])
        .chain(skipped_columns(dialect, config.table()))
        .chain(inbox)
        .chain(storage_settings(
            dialect,
            config.table(),
            config.inbox_table(),
        ))
    {
        match db.execute_unprepared(&statement).await {
            Ok(_) => {}
            // MySQL has no CREATE INDEX IF NOT EXISTS nor (MySQL 8) DROP
            // INDEX IF EXISTS, MySQL and SQLite no ADD COLUMN IF NOT EXISTS:
            // an index or column already there, or already gone, is fine.
            Err(err) if dialect != Dialect::Postgres && is_already_done(&err) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

fn is_already_done(err: &sea_orm::DbErr) -> bool {
    let text = err.to_string().to_lowercase();
    ["duplicate key name", "can't drop", "duplicate column name"]
        .iter()
        .any(|done| text.contains(done))
}
