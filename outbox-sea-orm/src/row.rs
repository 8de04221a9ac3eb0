//! Outbox messages in and out of rows.

use chrono::Timelike;
use sea_orm::{ConnectionTrait, DbErr, QueryResult};
use txoutbox_core::OutboxMessage;
use txoutbox_core::processor::__handover::LeasedCommit;
use txoutbox_core::store::ClaimedMessage;
use uuid::Uuid;

use crate::config::TableName;
use crate::dialect::{Dialect, Sql};
use crate::error::OutboxError;
use crate::stored_row::StoredRow;

/// Rows per INSERT statement: 15 parameters a row stays far below every
/// backend's parameter limit (SQLite's 32,766 is the smallest).
const ROWS_PER_INSERT: usize = 1000;

/// Writes messages as pending rows, one multi-row INSERT per 1,000 messages,
/// on whatever connection or transaction `db` is. Each message's
/// `occurred_at` is first cut to the precision the row keeps, so the
/// messages the caller holds afterwards equal what a claim reads back.
pub(crate) async fn insert_messages(
    db: &impl ConnectionTrait,
    table: &TableName,
    messages: &mut [OutboxMessage],
) -> Result<(), OutboxError> {
    let dialect = Dialect::of(db.get_database_backend());
    as_stored(dialect, messages);
    for chunk in messages.chunks(ROWS_PER_INSERT) {
        let mut sql = Sql::new(dialect);
        push_insert(&mut sql, table, chunk, None, None)?;
        db.execute_raw(sql.build()).await?;
    }
    Ok(())
}

/// Whether `count` messages fit one INSERT statement.
pub(crate) fn fit_one_insert(count: usize) -> bool {
    count <= ROWS_PER_INSERT
}

/// The columns an INSERT of messages writes, in [`push_row`]'s order.
const INSERT_COLUMNS: &str = "id, aggregate_type, aggregate_id, sequence, event_name, \
     event_version, subject, payload, headers, correlation_id, causation_id, tenant, \
     traceparent, occurred_at, created_at, status, attempts, next_attempt_at";

/// PostgreSQL: rows written already leased to a processor of this process
/// (see [`txoutbox_core::processor::__handover::LeaseOffer`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeaseAtCommit {
    pub(crate) token: Uuid,
    pub(crate) lease_millis: i64,
}

impl From<&LeasedCommit> for LeaseAtCommit {
    fn from(commit: &LeasedCommit) -> Self {
        Self {
            token: *commit.token().as_uuid(),
            lease_millis: crate::dialect::millis(commit.lease()),
        }
    }
}

/// The column an INSERT with a [`LeaseAtCommit`] returns per row: whether
/// the row was written leased.
pub(crate) const LEASED_AT_COMMIT: &str = "leased_at_commit";

/// Appends the INSERT of `messages` as pending rows to `sql`. With `only_if`
/// (PostgreSQL), the rows are inserted only if the named common table
/// expression of the statement returned a row:
/// `INSERT … SELECT * FROM (VALUES …) AS v WHERE EXISTS (SELECT 1 FROM <only_if>)`.
/// With `leased` (PostgreSQL), each row is written leased under its token
/// unless an earlier message of its aggregate is unpublished (then it waits
/// for a claim, so order holds), and the statement returns `id` and
/// [`LEASED_AT_COMMIT`] per row. Call [`as_stored`] on the messages first.
pub(crate) fn push_insert(
    sql: &mut Sql,
    table: &TableName,
    messages: &[OutboxMessage],
    only_if: Option<&str>,
    leased: Option<LeaseAtCommit>,
) -> Result<(), OutboxError> {
    let dialect = sql.dialect();
    let table = dialect.quote(table.as_str());
    match leased {
        Some(_) => sql.push(&format!(
            "INSERT INTO {table} ({INSERT_COLUMNS}, lease_token, lease_expires_at) \
             SELECT v.*, CASE WHEN f.free THEN l.token END, CASE WHEN f.free THEN l.until END \
             FROM (VALUES "
        )),
        None if only_if.is_some() => sql.push(&format!(
            "INSERT INTO {table} ({INSERT_COLUMNS}) SELECT * FROM (VALUES "
        )),
        None => sql.push(&format!("INSERT INTO {table} ({INSERT_COLUMNS}) VALUES ")),
    };
    for (i, message) in messages.iter().enumerate() {
        if i > 0 {
            sql.push(", ");
        }
        push_row(sql, dialect, message)?;
    }
    if let Some(lease) = leased {
        let token = sql.param(lease.token);
        let lease = sql.param(lease.lease_millis);
        sql.push(&format!(
            ") AS v ({INSERT_COLUMNS}) \
             CROSS JOIN (SELECT {token}::uuid AS token, {until} AS until) AS l \
             CROSS JOIN LATERAL (SELECT NOT EXISTS (SELECT 1 FROM {table} e \
                 WHERE e.aggregate_type = v.aggregate_type AND e.aggregate_id = v.aggregate_id \
                 AND e.sequence < v.sequence AND e.status <> 1 OFFSET 0) AS free) AS f",
            until = dialect.now_plus_millis(&lease),
        ));
    } else if only_if.is_some() {
        sql.push(") AS v");
    }
    if let Some(cte) = only_if {
        sql.push(&format!(" WHERE EXISTS (SELECT 1 FROM {cte})"));
    }
    if leased.is_some() {
        sql.push(&format!(
            " RETURNING id, lease_token IS NOT NULL AS {LEASED_AT_COMMIT}"
        ));
    }
    Ok(())
}

/// Cuts each message's `occurred_at` to the precision its row keeps
/// (microseconds; milliseconds on SQLite, see [`Dialect::time_value`]), so
/// the message handed to listeners after the commit equals the one a claim
/// reads back.
pub(crate) fn as_stored(dialect: Dialect, messages: &mut [OutboxMessage]) {
    let unit = match dialect {
        Dialect::Postgres | Dialect::MySql => 1_000,
        Dialect::Sqlite => 1_000_000,
    };
    for message in messages {
        let at = message.occurred_at;
        message.occurred_at = at
            .with_nanosecond(at.nanosecond() / unit * unit)
            .unwrap_or(at);
    }
}

fn push_row(sql: &mut Sql, dialect: Dialect, message: &OutboxMessage) -> Result<(), OutboxError> {
    let row = StoredRow::of(message)?;
    let now = dialect.now();
    sql.push("(");
    sql.bind(row.id).push(", ");
    sql.bind(row.aggregate_type).push(", ");
    sql.bind(row.aggregate_id).push(", ");
    sql.bind(row.sequence).push(", ");
    sql.bind(row.event_name).push(", ");
    sql.bind(row.event_version).push(", ");
    sql.bind(row.subject).push(", ");
    let payload = sql.param(row.payload);
    sql.push(&dialect.json_param(&payload)).push(", ");
    let headers = sql.param(row.headers);
    sql.push(&dialect.json_param(&headers)).push(", ");
    sql.bind(row.correlation_id).push(", ");
    sql.bind(row.causation_id).push(", ");
    sql.bind(row.tenant).push(", ");
    sql.bind(row.traceparent).push(", ");
    sql.bind(dialect.time_value(row.occurred_at));
    sql.push(&format!(", {now}, 0, 0, "));
    match message.deliver_at {
        // A delayed message: the claim takes it once it is due.
        Some(at) => sql.bind(dialect.time_value(at)),
        None => sql.push(now),
    };
    sql.push(")");
    Ok(())
}

/// The columns [`read_message`] expects, as a SELECT/RETURNING list (for a
/// RETURNING of a claim: the values the claim wrote).
pub(crate) fn message_columns(dialect: Dialect, alias: &str) -> String {
    columns(dialect, alias, format!("{alias}abandoned"))
}

/// The columns [`read_message`] expects, selected before a claim leases the
/// rows (MySQL/MariaDB, which has no `UPDATE … RETURNING`): `abandoned` as
/// the claim's [`abandon_increment`] will make it.
pub(crate) fn message_columns_before_claim(dialect: Dialect, alias: &str) -> String {
    columns(
        dialect,
        alias,
        format!(
            "({alias}abandoned + {}) AS abandoned",
            abandon_increment(alias)
        ),
    )
}

/// What a claim adds to a row's `abandoned`: 1 when it takes the row over
/// from a lease that ran out (every settlement clears the token), else 0.
pub(crate) fn abandon_increment(alias: &str) -> String {
    format!("CASE WHEN {alias}lease_token IS NULL THEN 0 ELSE 1 END")
}

fn columns(dialect: Dialect, alias: &str, abandoned: String) -> String {
    let c = |column: &str| format!("{alias}{column}");
    [
        c("id"),
        c("aggregate_type"),
        c("aggregate_id"),
        c("sequence"),
        c("event_name"),
        c("event_version"),
        c("subject"),
        format!("{} AS payload_text", dialect.json_text(&c("payload"))),
        format!("{} AS headers_text", dialect.json_text(&c("headers"))),
        c("correlation_id"),
        c("causation_id"),
        c("tenant"),
        c("traceparent"),
        c("occurred_at"),
        c("attempts"),
        abandoned,
    ]
    .join(", ")
}

/// Reads a row selected with [`message_columns`], with its failed attempts
/// and abandoned claims.
pub(crate) fn read_message(dialect: Dialect, row: &QueryResult) -> Result<ClaimedMessage, DbErr> {
    let attempts: i32 = row.try_get("", "attempts")?;
    let abandoned: i32 = row.try_get("", "abandoned")?;
    let message = StoredRow {
        id: row.try_get("", "id")?,
        aggregate_type: row.try_get("", "aggregate_type")?,
        aggregate_id: row.try_get("", "aggregate_id")?,
        sequence: row.try_get("", "sequence")?,
        event_name: row.try_get("", "event_name")?,
        event_version: row.try_get("", "event_version")?,
        subject: row.try_get("", "subject")?,
        payload: row.try_get("", "payload_text")?,
        headers: row.try_get("", "headers_text")?,
        correlation_id: row.try_get("", "correlation_id")?,
        causation_id: row.try_get("", "causation_id")?,
        tenant: row.try_get("", "tenant")?,
        traceparent: row.try_get("", "traceparent")?,
        occurred_at: dialect.time(row, "occurred_at")?,
    }
    .into_message()?;
    Ok(ClaimedMessage {
        message,
        attempts: u32::try_from(attempts).unwrap_or(0),
        abandoned: u32::try_from(abandoned).unwrap_or(0),
    })
}
