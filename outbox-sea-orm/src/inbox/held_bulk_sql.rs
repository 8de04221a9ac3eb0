//! The held-messages table's statements for many holds at once: a
//! [`HoldFilter`] as SQL, counting what it keeps, and releasing in bounded
//! batches, oldest hold first (see [`held_sql`](super::held_sql) for one).

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbErr};
use txoutbox_core::MessageId;
use txoutbox_core::consumer::Release;

use super::HoldFilter;
use crate::dialect::{Dialect, Sql};

/// The order holds are listed and released in: oldest hold first.
pub(super) const OLDEST_FIRST: &str = "parked_at, stream_sequence";

/// Appends ` AND …` for the rows of held aggregates not released yet that
/// `filter` keeps; `column` prefixes each column (`"h."` or `""`).
pub(super) fn push_unreleased(sql: &mut Sql, column: &str, filter: &HoldFilter) {
    let dialect = sql.dialect();
    sql.push(&format!(
        " AND {column}reason IS NOT NULL AND {column}release_as IS NULL"
    ));
    if let Some(aggregate_type) = filter.aggregate_type_is() {
        sql.push(&format!(" AND {column}aggregate_type = "))
            .bind(aggregate_type);
    }
    if let Some(text) = filter.reason_text() {
        // `!` escapes LIKE's wildcards on every backend (a backslash would
        // need doubling on MySQL only).
        let pattern = format!("%{}%", escape_like(text));
        sql.push(&format!(" AND LOWER({column}reason) LIKE LOWER("))
            .bind(pattern)
            .push(") ESCAPE '!'");
    }
    if let Some(at) = filter.before() {
        sql.push(&format!(" AND {column}parked_at < "))
            .bind(dialect.time_value(at));
    }
    if let Some(at) = filter.after() {
        sql.push(&format!(" AND {column}parked_at > "))
            .bind(dialect.time_value(at));
    }
}

/// `text` with LIKE's wildcards and the escape character `!` escaped.
fn escape_like(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '!' | '%' | '_') {
            escaped.push('!');
        }
        escaped.push(c);
    }
    escaped
}

/// How many held aggregates of `consumer` not released yet `filter` keeps.
pub(super) async fn count(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    filter: &HoldFilter,
) -> Result<u64, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "SELECT COUNT(*) AS held FROM {} WHERE consumer = ",
        dialect.quote(table)
    ));
    sql.bind(consumer);
    push_unreleased(&mut sql, "", filter);
    let held = db
        .query_one_raw(sql.build())
        .await?
        .map(|row| row.try_get::<i64>("", "held"))
        .transpose()?
        .unwrap_or(0);
    Ok(u64::try_from(held).unwrap_or(0))
}

/// The database's clock now, as the hold times are written.
pub(super) async fn now(db: &impl ConnectionTrait) -> Result<DateTime<Utc>, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    sql.push(&format!("SELECT {} AS now", dialect.now()));
    let row = db
        .query_one_raw(sql.build())
        .await?
        .ok_or_else(|| DbErr::Custom("SELECT now returned no row".to_owned()))?;
    dialect.time(&row, "now")
}

/// Releases `how` the oldest `batch` held aggregates of `consumer` not
/// released yet that `filter` keeps and that were held at or before
/// `cutoff` (so an aggregate held again meanwhile, behind a message that
/// failed after its release, is left for the operator to see): one
/// statement. Returns how many it released.
pub(super) async fn release_batch(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    filter: &HoldFilter,
    cutoff: DateTime<Utc>,
    how: Release,
    batch: u32,
) -> Result<u64, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let t = dialect.quote(table);
    let mut sql = Sql::new(dialect);
    sql.push(&format!("UPDATE {t} SET release_as = "));
    sql.bind(how.as_str())
        .push(" WHERE consumer = ")
        .bind(consumer);
    let keep = |sql: &mut Sql| {
        push_unreleased(sql, "", filter);
        sql.push(" AND parked_at <= ")
            .bind(dialect.time_value(cutoff))
            .push(&format!(" ORDER BY {OLDEST_FIRST} LIMIT "))
            .bind(i64::from(batch));
    };
    match dialect {
        // MySQL cannot update a table it selects from in a subquery, but
        // has UPDATE ... ORDER BY ... LIMIT.
        Dialect::MySql => keep(&mut sql),
        _ => {
            sql.push(&format!(
                " AND message_id IN (SELECT message_id FROM {t} WHERE consumer = "
            ))
            .bind(consumer);
            keep(&mut sql);
            sql.push(")");
        }
    }
    // Every row it matches changes (`release_as` was NULL), so MySQL's
    // count of changed rows is the count of released holds here.
    Ok(db.execute_raw(sql.build()).await?.rows_affected())
}

/// Releases `how` those of the holds `ids` (each the message an aggregate
/// is held behind) of `consumer` that are held and not released yet: one
/// statement. Returns how many it released.
pub(super) async fn release_ids(
    db: &impl ConnectionTrait,
    table: &str,
    consumer: &str,
    ids: &[MessageId],
    how: Release,
) -> Result<u64, DbErr> {
    let dialect = Dialect::of(db.get_database_backend());
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "UPDATE {} SET release_as = ",
        dialect.quote(table)
    ));
    sql.bind(how.as_str())
        .push(" WHERE consumer = ")
        .bind(consumer)
        .push(" AND reason IS NOT NULL AND release_as IS NULL AND ")
        .bind_ids("message_id", ids.iter().map(|id| *id.as_uuid()));
    Ok(db.execute_raw(sql.build()).await?.rows_affected())
}

#[cfg(test)]
mod tests {
    #[test]
    fn wildcards_are_plain_characters() {
        assert_eq!(super::escape_like("100% _sure_!"), "100!% !_sure!_!!");
    }
}
