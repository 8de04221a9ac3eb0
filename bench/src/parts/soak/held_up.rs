//! What a database outage held up, from the effects' `applied_at` and the
//! rows' `published_at` (the database's clock, the machine's): the
//! aggregates with an event written before the crash and applied after it,
//! how long after the database's return the subscriber applied its first
//! effect, how long until the last of those aggregates applied an effect
//! again ("every aggregate moves again"), and whether the events it held up
//! were recorded published before the crash or after the return (the
//! processor's share of the wait, against the subscriber's).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use crate::harness::error::BoxError;
use crate::parts::soak::timeline::Hit;

/// One database outage's toll on the aggregates.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HeldUp {
    /// Aggregates with an event written before the crash and applied after
    /// it.
    pub(crate) aggregates: u64,
    /// From the return to the first effect applied.
    pub(crate) first_applied: Option<Duration>,
    /// From the return until the last event written before the crash and
    /// applied after it was recorded published; `None` if every one was
    /// recorded before the crash.
    pub(crate) every_published: Option<Duration>,
    /// From the return until every one of those aggregates had applied an
    /// event again.
    pub(crate) every_aggregate: Option<Duration>,
}

/// Reads what `hit` (a database outage) held up.
pub(crate) async fn held_up(db: &DatabaseConnection, hit: &Hit) -> Result<HeldUp, BoxError> {
    let sql = "WITH held AS ( \
           SELECT DISTINCT m.aggregate_id FROM outbox_messages m \
           JOIN effects e ON e.message_id = m.id \
           WHERE m.created_at < to_timestamp($1) AND e.applied_at > to_timestamp($1)), \
         moved AS ( \
           SELECT e.aggregate_id, min(e.applied_at) AS first FROM effects e \
           JOIN held USING (aggregate_id) WHERE e.applied_at >= to_timestamp($2) \
           GROUP BY e.aggregate_id), \
         recorded AS ( \
           SELECT max(m.published_at) AS last FROM outbox_messages m \
           JOIN effects e ON e.message_id = m.id \
           WHERE m.created_at < to_timestamp($1) AND e.applied_at > to_timestamp($1) \
             AND m.published_at >= to_timestamp($2)) \
         SELECT (SELECT count(*) FROM held) AS held, \
           extract(epoch FROM (SELECT last FROM recorded) - to_timestamp($2))::float8 \
             AS published, \
           extract(epoch FROM (SELECT min(applied_at) FROM effects \
             WHERE applied_at >= to_timestamp($2)) - to_timestamp($2))::float8 AS first, \
           extract(epoch FROM (SELECT max(first) FROM moved) - to_timestamp($2))::float8 \
             AS every";
    let (crash, back) = (epoch(hit.wall.0)?, epoch(hit.wall.1)?);
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            sql,
            [crash.into(), back.into()],
        ))
        .await?
        .ok_or("no row")?;
    let seconds = |column: &str| -> Result<Option<Duration>, BoxError> {
        Ok(row
            .try_get::<Option<f64>>("", column)?
            .map(|s| Duration::from_secs_f64(s.max(0.0))))
    };
    Ok(HeldUp {
        aggregates: row.try_get::<i64>("", "held")?.max(0) as u64,
        first_applied: seconds("first")?,
        every_published: seconds("published")?,
        every_aggregate: seconds("every")?,
    })
}

fn epoch(at: SystemTime) -> Result<f64, BoxError> {
    Ok(at.duration_since(UNIX_EPOCH)?.as_secs_f64())
}
