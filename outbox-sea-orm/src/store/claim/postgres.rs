//! PostgreSQL: the walk, the lock and the lease in one statement.
//!
//! The statement is sent as a simple query, its values written into its
//! text, behind `SET LOCAL jit = off` (one round trip, one implicit
//! transaction, which also commits asynchronously; see
//! [`SeaOrmOutboxStore`](crate::SeaOrmOutboxStore)):
//! - it is planned with its values every time, so a plan cached while the
//!   table was small can never make it slow later;
//! - it never pays for JIT compilation, which PostgreSQL would otherwise
//!   start whenever a stale estimate put its cost above `jit_above_cost`;
//! - its shape does not depend on statistics: every step is an ordered
//!   index probe with `LIMIT`, so fresh, stale or missing statistics give
//!   the same plan (pinned by the store's plan tests).

use std::fmt::Write as _;
use std::time::Duration;

use outbox_core::{LeaseToken, StoreError};
use sea_orm::QueryResult;

use super::{AggregateKey, Walked, first_lease, publishable};
use crate::dialect::Dialect;
use crate::row::message_columns;
use crate::store::{SeaOrmOutboxStore, millis, store_err};

/// The column of the walk's step, for the cursor.
const STEP: &str = "walk_step";

/// What the claim's implicit transaction runs with: no JIT, and an
/// asynchronous commit.
const SETTINGS: &str = "SET LOCAL jit = off; SET LOCAL synchronous_commit = off;";

/// `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` of an ordinary claim of `limit`
/// from the first aggregate, run and rolled back: the plan tests read its
/// shape (nodes, buffers touched, no JIT).
pub(super) async fn explain(store: &SeaOrmOutboxStore, limit: usize) -> Result<String, StoreError> {
    let sql = format!(
        "BEGIN; {SETTINGS} EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {}; ROLLBACK;",
        statement(
            &store.table(),
            LeaseToken::new(),
            limit,
            Duration::from_secs(30),
            None
        )
    );
    let rows = run(&store.db, sql).await?;
    let plan = rows
        .first()
        .ok_or_else(|| StoreError::msg("EXPLAIN returned no plan"))?;
    let plan: serde_json::Value = plan
        .try_get("", "QUERY PLAN")
        .map_err(store_err("reading the plan"))?;
    Ok(plan.to_string())
}

/// Leases up to `limit` messages, walking the aggregates after `after`.
pub(super) async fn walk(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    limit: usize,
    lease: Duration,
    after: Option<&AggregateKey>,
) -> Result<Walked, StoreError> {
    let sql = format!(
        "{SETTINGS} {}",
        statement(&store.table(), token, limit, lease, after)
    );
    let rows = run(&store.db, sql).await?;
    let expires_at = first_lease(Dialect::Postgres, &rows, "lease_expires_at")?;
    let mut last: Option<(i64, AggregateKey)> = None;
    let read = store_err("reading the claim");
    for row in &rows {
        let step: i64 = row.try_get("", STEP).map_err(&read)?;
        if last.as_ref().is_none_or(|(s, _)| step > *s) {
            let key = AggregateKey {
                aggregate_type: row.try_get("", "aggregate_type").map_err(&read)?,
                aggregate_id: row.try_get("", "aggregate_id").map_err(&read)?,
            };
            last = Some((step, key));
        }
    }
    Ok(Walked {
        rows,
        expires_at,
        last: last.map(|(_, key)| key),
    })
}

/// The claim's text, values included.
///
/// - `walk`: from the first aggregate after the cursor, one row per
///   aggregate with an unpublished message, its head (lowest unpublished
///   sequence, from the partial `<table>_unpublished` index, which holds no
///   published row), until `limit` heads are publishable.
/// - `chosen`: from each publishable head, its unpublished messages in
///   sequence order, `limit` messages in all (a nested loop that stops
///   pulling once it has them), each with its position in its run.
/// - `locked`: those publishable now, locked, skipping rows another claim
///   holds.
/// - `kept`: a message whose every earlier message of the run is locked here
///   too (its position among the locked rows of its aggregate is its
///   position in the run): a row skipped, or not publishable, ends its run.
fn statement(
    table: &str,
    token: LeaseToken,
    limit: usize,
    lease: Duration,
    after: Option<&AggregateKey>,
) -> String {
    let head_columns = |alias: &str| {
        format!(
            "{alias}.aggregate_type::text AS aggregate_type, {alias}.aggregate_id::text AS aggregate_id, \
             {alias}.sequence, {free} AS free",
            free = publishable(Dialect::Postgres, alias)
        )
    };
    let mut first = String::from("h.status <> 1");
    if let Some(key) = after {
        let _ = write!(
            first,
            " AND (h.aggregate_type, h.aggregate_id) > ({}, {})",
            literal(&key.aggregate_type),
            literal(&key.aggregate_id)
        );
    }
    let order = "ORDER BY h.aggregate_type, h.aggregate_id, h.sequence LIMIT 1";
    format!(
        "WITH RECURSIVE walk AS ( \
           SELECT 1::bigint AS step, f.*, f.free::int::bigint AS found FROM ( \
             SELECT {head_h} FROM {table} h WHERE {first} {order}) f \
           UNION ALL \
           SELECT w.step + 1, n.*, w.found + n.free::int FROM walk w CROSS JOIN LATERAL ( \
             SELECT {head_h} FROM {table} h WHERE h.status <> 1 \
             AND (h.aggregate_type, h.aggregate_id) > (w.aggregate_type, w.aggregate_id) {order}) n \
           WHERE w.found < {limit} \
         ), chosen AS ( \
           SELECT r.id, w.aggregate_type, w.aggregate_id, r.sequence, r.free, r.pos, w.step \
           FROM walk w CROSS JOIN LATERAL ( \
             SELECT e.id, e.sequence, {free_e} AS free, row_number() OVER (ORDER BY e.sequence) AS pos \
             FROM {table} e WHERE e.aggregate_type = w.aggregate_type AND e.aggregate_id = w.aggregate_id \
             AND e.status <> 1 AND e.sequence >= w.sequence ORDER BY e.sequence LIMIT {limit}) r \
           WHERE w.free LIMIT {limit} \
         ), locked AS ( \
           SELECT m.id, c.aggregate_type, c.aggregate_id, c.sequence, c.pos, c.step \
           FROM chosen c JOIN {table} m ON m.id = c.id WHERE c.free AND {free_m} \
           FOR UPDATE OF m SKIP LOCKED \
         ), kept AS ( \
           SELECT k.id, k.step FROM (SELECT l.id, l.pos, l.step, row_number() OVER ( \
             PARTITION BY l.aggregate_type, l.aggregate_id ORDER BY l.sequence) AS locked_pos \
             FROM locked l) k WHERE k.locked_pos = k.pos \
         ) \
         UPDATE {table} AS m SET lease_token = '{token}'::uuid, \
           lease_expires_at = now() + {lease_ms} * interval '1 millisecond' \
         FROM kept WHERE m.id = kept.id \
         RETURNING {columns}, m.lease_expires_at, kept.step AS {STEP}",
        head_h = head_columns("h"),
        free_e = publishable(Dialect::Postgres, "e"),
        free_m = publishable(Dialect::Postgres, "m"),
        token = token.as_uuid(),
        lease_ms = millis(lease),
        columns = message_columns(Dialect::Postgres, "m."),
    )
}

/// A PostgreSQL string literal of `text` (with `standard_conforming_strings`
/// on, the default since 9.1, only quotes are special; a backslash switches
/// to an escape string so the literal means the same under either setting).
fn literal(text: &str) -> String {
    if text.contains('\\') {
        format!("E'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
    } else {
        format!("'{}'", text.replace('\'', "''"))
    }
}

/// Sends `sql` as one simple query; returns the rows of its last statement.
#[cfg(feature = "postgres")]
async fn run(
    db: &sea_orm::DatabaseConnection,
    sql: String,
) -> Result<Vec<QueryResult>, StoreError> {
    use sea_orm::sqlx;
    let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .fetch_all(db.get_postgres_connection_pool())
        .await
        .map_err(|err| StoreError::new("claiming", err))?;
    Ok(rows.into_iter().map(QueryResult::from).collect())
}

#[cfg(not(feature = "postgres"))]
async fn run(
    _db: &sea_orm::DatabaseConnection,
    _sql: String,
) -> Result<Vec<QueryResult>, StoreError> {
    Err(StoreError::msg(
        "PostgreSQL support is not compiled in (feature `postgres`)",
    ))
}

#[cfg(test)]
mod tests {
    use super::literal;

    #[test]
    fn literals_quote_what_is_special() {
        assert_eq!(literal("order"), "'order'");
        assert_eq!(literal("o'brien"), "'o''brien'");
        assert_eq!(literal(r"a\'b"), r"E'a\\''b'");
    }
}
