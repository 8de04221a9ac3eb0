//! The outbox table as the outage part samples it: the backlog, the age of
//! the oldest *claimable* row (pending, no live lease, not backing off, no
//! earlier unpublished row of its aggregate: the row a claim should have
//! taken), the rows held under a live lease, and the pending rows written
//! before a cut-off (the broker's return).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use tokio::time::Instant;
use txoutbox_fixtures::Backend;

use crate::harness::error::BoxError;

/// One look at the table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    /// When it was taken (its query's end).
    pub(crate) at: Instant,
    /// Pending rows.
    pub(crate) backlog: i64,
    /// The oldest claimable row's age, by the database clock.
    pub(crate) age: Duration,
    /// Pending rows under a live lease.
    pub(crate) leased: i64,
    /// Pending rows created at or before the cut-off (0 without one).
    pub(crate) before: i64,
    /// The most pending rows of one aggregate.
    pub(crate) deepest: i64,
}

/// Samples every `every` until `done` says so or `longest` has passed.
pub(crate) async fn sample_until(
    db: &DatabaseConnection,
    backend: Backend,
    cutoff: Option<DateTime<Utc>>,
    every: Duration,
    longest: Duration,
    mut done: impl FnMut(&[Sample]) -> bool,
) -> Result<Vec<Sample>, BoxError> {
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut ticks = tokio::time::interval(every);
    while started.elapsed() < longest {
        ticks.tick().await;
        samples.push(measure(db, backend, cutoff).await?);
        if done(&samples) {
            break;
        }
    }
    Ok(samples)
}

/// `at` as a literal of the backend's time column (UTC).
fn time_literal(backend: Backend, at: DateTime<Utc>) -> String {
    match backend {
        Backend::Postgres => format!("TIMESTAMPTZ '{}+00'", at.format("%Y-%m-%d %H:%M:%S%.6f")),
        Backend::MySql => format!("'{}'", at.format("%Y-%m-%d %H:%M:%S%.6f")),
        // As the store writes it (`dialect.rs`).
        Backend::Sqlite => format!("'{}'", at.format("%Y-%m-%d %H:%M:%S%.3f")),
    }
}

async fn measure(
    db: &DatabaseConnection,
    backend: Backend,
    cutoff: Option<DateTime<Utc>>,
) -> Result<Sample, BoxError> {
    let (now, age_ms) = match backend {
        Backend::Postgres => (
            "now()",
            "CAST(EXTRACT(EPOCH FROM (now() - min(m.created_at))) * 1000 AS DOUBLE PRECISION)",
        ),
        Backend::MySql => (
            "UTC_TIMESTAMP(6)",
            "CAST(TIMESTAMPDIFF(MICROSECOND, min(m.created_at), UTC_TIMESTAMP(6)) / 1000 AS DOUBLE)",
        ),
        Backend::Sqlite => (
            "strftime('%Y-%m-%d %H:%M:%f', 'now')",
            "CAST((julianday('now') - julianday(min(m.created_at))) * 86400000.0 AS REAL)",
        ),
    };
    // Counted either way, so the column has one type on every backend.
    let before = cutoff.map_or("1 = 0".to_owned(), |cutoff| {
        format!("created_at <= {}", time_literal(backend, cutoff))
    });
    let sql = format!(
        "SELECT {age_ms} AS age_ms, \
           (SELECT count(*) FROM outbox_messages WHERE status = 0) AS backlog, \
           (SELECT count(*) FROM outbox_messages WHERE status = 0 AND lease_expires_at > {now}) AS leased, \
           (SELECT count(*) FROM outbox_messages WHERE status = 0 AND {before}) AS before_cutoff, \
           (SELECT count(*) FROM outbox_messages WHERE status = 0 \
             GROUP BY aggregate_type, aggregate_id ORDER BY count(*) DESC LIMIT 1) AS deepest \
         FROM outbox_messages m WHERE m.status = 0 AND m.next_attempt_at <= {now} \
         AND (m.lease_expires_at IS NULL OR m.lease_expires_at <= {now}) \
         AND NOT EXISTS (SELECT 1 FROM outbox_messages e WHERE e.aggregate_type = m.aggregate_type \
           AND e.aggregate_id = m.aggregate_id AND e.status <> 1 AND e.sequence < m.sequence)"
    );
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await?
        .ok_or("no row")?;
    let age: Option<f64> = row.try_get("", "age_ms")?;
    Ok(Sample {
        at: Instant::now(),
        backlog: row.try_get("", "backlog")?,
        age: Duration::from_secs_f64(age.unwrap_or(0.0).max(0.0) / 1000.0),
        leased: row.try_get("", "leased")?,
        before: row.try_get("", "before_cutoff")?,
        deepest: row
            .try_get::<Option<i64>>("", "deepest")?
            .unwrap_or_default(),
    })
}
