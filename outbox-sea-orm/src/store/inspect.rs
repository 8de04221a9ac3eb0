//! Reading messages for an operator: one message by id (`outbox dead show`)
//! and one aggregate's unsettled messages (`outbox aggregate`), each with
//! its state. Rows are read column by column, never parsed as a message, so
//! a row the claim could not read (and sent dead for it) still shows.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbErr, QueryResult};
use txoutbox_core::{MessageId, StoreError};

use super::maintenance::count;
use super::state::{MessageState, read_state, state_columns};
use super::{SeaOrmOutboxStore, store_err};
use crate::dialect::{Dialect, Sql};

/// A message row as stored, with its state.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredMessage {
    /// The message id.
    pub id: MessageId,
    /// Its event name.
    pub event_name: String,
    /// Its event version.
    pub event_version: u32,
    /// The subject it is (or was) published on.
    pub subject: String,
    /// Its aggregate's type.
    pub aggregate_type: String,
    /// Its aggregate's id.
    pub aggregate_id: String,
    /// Its position in the aggregate's history.
    pub sequence: u64,
    /// When the event happened.
    pub occurred_at: DateTime<Utc>,
    /// When the row was written (by the database clock).
    pub created_at: DateTime<Utc>,
    /// Correlation id.
    pub correlation_id: String,
    /// Causation id.
    pub causation_id: Option<String>,
    /// Tenant.
    pub tenant: Option<String>,
    /// W3C `traceparent`.
    pub traceparent: Option<String>,
    /// The `headers` column as stored: a JSON object of the application
    /// headers (and the `tracestate` under its reserved name), or `None`.
    pub headers: Option<String>,
    /// The payload as stored (JSON text).
    pub payload: String,
    /// Failed publish attempts.
    pub attempts: u32,
    /// Claims of it that ended without a settlement.
    pub abandoned: u32,
    /// The last publish error (why it is dead, for a dead message).
    pub last_error: Option<String>,
    /// Where it stands.
    pub state: MessageState,
}

/// One aggregate's unsettled messages, in sequence order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AggregateQueue {
    /// The aggregate's type.
    pub aggregate_type: String,
    /// The aggregate's id.
    pub aggregate_id: String,
    /// Its lowest unsettled messages (after the sequence asked for, if
    /// any), in sequence order, up to the limit asked for.
    pub messages: Vec<StoredMessage>,
    /// How many of its messages are unsettled in all (after the sequence
    /// asked for, if any).
    pub unsettled: u64,
    /// The highest sequence of its settled (published or skipped)
    /// messages, if any are still in the table.
    pub last_settled: Option<u64>,
}

impl AggregateQueue {
    /// The message that holds the others back, if any: the head (lowest
    /// unsettled sequence) when it is dead, not due yet (a backoff) or
    /// leased. A pending, due head holds nothing back: the next claim takes
    /// it. (Of a queue read after a sequence, the first message listed.)
    pub fn blocker(&self) -> Option<&StoredMessage> {
        self.messages
            .first()
            .filter(|head| head.state != MessageState::Pending)
    }
}

/// The columns [`read_stored`] expects.
pub(super) fn columns(dialect: Dialect) -> String {
    let json = |column: &str| format!("{} AS {column}_text", dialect.json_text(column));
    format!(
        "id, event_name, event_version, subject, aggregate_type, aggregate_id, sequence, \
         occurred_at, created_at, correlation_id, causation_id, tenant, traceparent, {}, {}, \
         attempts, abandoned, last_error, {}",
        json("headers"),
        json("payload"),
        state_columns(dialect, "")
    )
}

pub(super) fn read_stored(dialect: Dialect, row: &QueryResult) -> Result<StoredMessage, DbErr> {
    let sequence: i64 = row.try_get("", "sequence")?;
    let attempts: i32 = row.try_get("", "attempts")?;
    let abandoned: i32 = row.try_get("", "abandoned")?;
    let version: i64 = match row.try_get::<i32>("", "event_version") {
        Ok(version) => i64::from(version),
        Err(_) => row.try_get("", "event_version")?,
    };
    Ok(StoredMessage {
        id: MessageId::from_uuid(row.try_get("", "id")?),
        event_name: row.try_get("", "event_name")?,
        event_version: u32::try_from(version).unwrap_or(0),
        subject: row.try_get("", "subject")?,
        aggregate_type: row.try_get("", "aggregate_type")?,
        aggregate_id: row.try_get("", "aggregate_id")?,
        sequence: u64::try_from(sequence).unwrap_or(0),
        occurred_at: dialect.time(row, "occurred_at")?,
        created_at: dialect.time(row, "created_at")?,
        correlation_id: row.try_get("", "correlation_id")?,
        causation_id: row.try_get("", "causation_id")?,
        tenant: row.try_get("", "tenant")?,
        traceparent: row.try_get("", "traceparent")?,
        headers: row.try_get("", "headers_text")?,
        payload: row.try_get("", "payload_text")?,
        attempts: u32::try_from(attempts).unwrap_or(0),
        abandoned: u32::try_from(abandoned).unwrap_or(0),
        last_error: row.try_get("", "last_error")?,
        state: read_state(dialect, row)?,
    })
}

/// The message `id`, in whatever state, if the table holds it.
pub(super) async fn message(
    store: &SeaOrmOutboxStore,
    id: MessageId,
) -> Result<Option<StoredMessage>, StoreError> {
    let mut sql = Sql::new(store.dialect);
    sql.push(&format!(
        "SELECT {} FROM {} WHERE id = ",
        columns(store.dialect),
        store.table()
    ));
    sql.bind(*id.as_uuid());
    let row = store
        .db
        .query_one_raw(sql.build())
        .await
        .map_err(store_err("reading a message"))?;
    row.map(|row| read_stored(store.dialect, &row))
        .transpose()
        .map_err(store_err("reading a message"))
}

/// `aggregate`'s lowest `limit` unsettled messages (after sequence `after`,
/// if given), how many it has (after `after`), and its last settled
/// sequence: three probes of the aggregate's indexes.
pub(super) async fn aggregate_queue(
    store: &SeaOrmOutboxStore,
    aggregate_type: &str,
    aggregate_id: &str,
    after: Option<u64>,
    limit: u32,
) -> Result<AggregateQueue, StoreError> {
    let dialect = store.dialect;
    let table = store.table();
    let doing = "reading an aggregate's messages";
    let read = store_err(doing);
    let after = after.map(|sequence| i64::try_from(sequence).unwrap_or(i64::MAX));
    let of_aggregate = |sql: &mut Sql| {
        sql.push(" WHERE aggregate_type = ")
            .bind(aggregate_type)
            .push(" AND aggregate_id = ")
            .bind(aggregate_id);
    };
    let unsettled_after = |sql: &mut Sql| {
        sql.push(" AND status <> 1");
        if let Some(after) = after {
            sql.push(" AND sequence > ").bind(after);
        }
    };

    let mut sql = Sql::new(dialect);
    sql.push(&format!("SELECT {} FROM {table}", columns(dialect)));
    of_aggregate(&mut sql);
    unsettled_after(&mut sql);
    let limit = sql.param(i64::from(limit));
    sql.push(&format!(" ORDER BY sequence LIMIT {limit}"));
    let messages = store
        .read_rows(sql.build(), doing, |row| read_stored(dialect, row))
        .await?;

    let mut sql = Sql::new(dialect);
    sql.push(&format!("SELECT COUNT(*) AS n FROM {table}"));
    of_aggregate(&mut sql);
    unsettled_after(&mut sql);
    let unsettled = match store.db.query_one_raw(sql.build()).await.map_err(&read)? {
        Some(row) => count(&row, "n").map_err(&read)?,
        None => 0,
    };

    let mut sql = Sql::new(dialect);
    sql.push(&format!("SELECT MAX(sequence) AS s FROM {table}"));
    of_aggregate(&mut sql);
    sql.push(" AND status = 1");
    let last_settled = match store.db.query_one_raw(sql.build()).await.map_err(&read)? {
        Some(row) => row
            .try_get::<Option<i64>>("", "s")
            .map_err(&read)?
            .and_then(|s| u64::try_from(s).ok()),
        None => None,
    };
    Ok(AggregateQueue {
        aggregate_type: aggregate_type.to_owned(),
        aggregate_id: aggregate_id.to_owned(),
        messages,
        unsettled,
        last_settled,
    })
}
