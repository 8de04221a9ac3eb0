//! The held-messages table's statements (`<inbox>_held`, see
//! [`schema`](crate::schema)).

use sea_orm::{ConnectionTrait, DbErr, QueryResult};
use txoutbox_core::MessageId;
use txoutbox_core::consumer::{Hold, ParkedMessage, Release};

use super::{HoldFilter, held_bulk_sql};
use crate::dialect::{Dialect, Sql};

/// Parks `message` for `consumer`. Fails with a unique violation when it is
/// parked already.
pub(super) async fn park(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    message: &ParkedMessage,
    event_name: &str,
) -> Result<(), DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let headers = serde_json::to_string(&message.headers)
        .map_err(|err| DbErr::Custom(format!("headers of a parked message: {err}")))?;
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "INSERT INTO {} (consumer, message_id, aggregate_type, aggregate_id, stream_sequence, \
         event_name, subject, headers, payload, reason, release_as, parked_at) VALUES ",
        dialect.quote(table)
    ));
    sql.push("(")
        .bind(consumer)
        .push(", ")
        .bind(*message.message_id.as_uuid())
        .push(", ")
        .bind(message.aggregate_type.as_str())
        .push(", ")
        .bind(message.aggregate_id.as_str())
        .push(", ")
        .bind(sequence(message.stream_sequence))
        .push(", ")
        .bind(event_name)
        .push(", ")
        .bind(message.subject.as_str())
        .push(", ")
        .bind(headers)
        .push(", ")
        .bind(message.payload.clone())
        .push(", ")
        .bind(message.reason.clone())
        .push(&format!(", NULL, {})", dialect.now()));
    db.execute_raw(sql.build()).await.map(|_| ())
}

/// `consumer`'s held aggregates, oldest hold first, each with how many
/// messages wait behind it: all of them (`None`), or the first `limit` of
/// those not released yet that a filter keeps.
pub(super) async fn holds(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    selection: Option<(&HoldFilter, u32)>,
) -> Result<Vec<Hold>, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let t = dialect.quote(table);
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "SELECT h.aggregate_type, h.aggregate_id, h.message_id, h.event_name, h.reason, \
         h.release_as, h.parked_at, (SELECT COUNT(*) FROM {t} w WHERE w.consumer = h.consumer \
         AND w.aggregate_type = h.aggregate_type AND w.aggregate_id = h.aggregate_id \
         AND w.stream_sequence > h.stream_sequence) AS waiting \
         FROM {t} h WHERE h.consumer = "
    ));
    sql.bind(consumer).push(" AND h.reason IS NOT NULL");
    if let Some((filter, _)) = selection {
        held_bulk_sql::push_unreleased(&mut sql, "h.", filter);
    }
    sql.push(" ORDER BY h.parked_at, h.stream_sequence");
    if let Some((_, limit)) = selection {
        sql.push(" LIMIT ").bind(i64::from(limit));
    }
    db.query_all_raw(sql.build())
        .await?
        .iter()
        .map(|row| {
            let release: Option<String> = row.try_get("", "release_as")?;
            Ok(Hold::new(
                row.try_get::<String>("", "aggregate_type")?,
                row.try_get::<String>("", "aggregate_id")?,
                message_id(row)?,
                row.try_get::<String>("", "event_name")?,
                row.try_get::<String>("", "reason")?,
                u64::try_from(row.try_get::<i64>("", "waiting")?).unwrap_or(0),
                release.as_deref().and_then(Release::parse),
            )
            .with_held_since(dialect.time(row, "parked_at")?))
        })
        .collect()
}

/// The messages `consumer` parked for an aggregate, in stream order.
pub(super) async fn parked(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    aggregate_type: &str,
    aggregate_id: &str,
) -> Result<Vec<ParkedMessage>, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "SELECT message_id, stream_sequence, subject, headers, payload, reason FROM {} \
         WHERE consumer = ",
        dialect.quote(table)
    ));
    sql.bind(consumer)
        .push(" AND aggregate_type = ")
        .bind(aggregate_type)
        .push(" AND aggregate_id = ")
        .bind(aggregate_id)
        .push(" ORDER BY stream_sequence");
    db.query_all_raw(sql.build())
        .await?
        .iter()
        .map(|row| {
            let headers: String = row.try_get("", "headers")?;
            let headers = serde_json::from_str(&headers)
                .map_err(|err| DbErr::Custom(format!("headers of a parked message: {err}")))?;
            Ok(ParkedMessage::new(
                message_id(row)?,
                aggregate_type,
                aggregate_id,
                u64::try_from(row.try_get::<i64>("", "stream_sequence")?).unwrap_or(0),
                row.try_get::<String>("", "subject")?,
                headers,
                row.try_get::<Vec<u8>>("", "payload")?,
                row.try_get::<Option<String>>("", "reason")?,
            ))
        })
        .collect()
}

/// Forgets the parked message `id`.
pub(super) async fn delete(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    id: MessageId,
) -> Result<(), DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "DELETE FROM {} WHERE consumer = ",
        dialect.quote(table)
    ));
    sql.bind(consumer)
        .push(" AND message_id = ")
        .bind(*id.as_uuid());
    db.execute_raw(sql.build()).await.map(|_| ())
}

/// Makes the parked message `id` the one its aggregate is held behind, for
/// `reason`, since now, and clears any release.
pub(super) async fn hold_behind(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    id: MessageId,
    reason: &str,
) -> Result<(), DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    sql.push(&format!("UPDATE {} SET reason = ", dialect.quote(table)));
    sql.bind(reason)
        .push(&format!(
            ", release_as = NULL, parked_at = {} WHERE consumer = ",
            dialect.now()
        ))
        .bind(consumer)
        .push(" AND message_id = ")
        .bind(*id.as_uuid());
    db.execute_raw(sql.build()).await.map(|_| ())
}

/// Marks an aggregate's hold as released `how`; whether it was held.
pub(super) async fn release(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    aggregate_type: &str,
    aggregate_id: &str,
    how: Release,
) -> Result<bool, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "UPDATE {} SET release_as = ",
        dialect.quote(table)
    ));
    sql.bind(how.as_str());
    where_held_behind(&mut sql, consumer, aggregate_type, aggregate_id);
    // MySQL counts changed rows only: a second identical release reports 0,
    // so ask again rather than trusting the count.
    db.execute_raw(sql.build()).await?;
    let mut check = Sql::new(dialect);
    check.push(&format!(
        "SELECT COUNT(*) AS held FROM {}",
        dialect.quote(table)
    ));
    where_held_behind(&mut check, consumer, aggregate_type, aggregate_id);
    let held = db
        .query_one_raw(check.build())
        .await?
        .map(|row| row.try_get::<i64>("", "held"))
        .transpose()?
        .unwrap_or(0);
    Ok(held > 0)
}

/// ` WHERE` the row an aggregate of `consumer` is held behind.
fn where_held_behind(sql: &mut Sql, consumer: &str, aggregate_type: &str, aggregate_id: &str) {
    sql.push(" WHERE consumer = ")
        .bind(consumer)
        .push(" AND aggregate_type = ")
        .bind(aggregate_type)
        .push(" AND aggregate_id = ")
        .bind(aggregate_id)
        .push(" AND reason IS NOT NULL");
}

fn message_id(row: &QueryResult) -> Result<MessageId, DbErr> {
    row.try_get::<uuid::Uuid>("", "message_id")
        .map(MessageId::from_uuid)
}

fn sequence(stream_sequence: u64) -> i64 {
    i64::try_from(stream_sequence).unwrap_or(i64::MAX)
}
