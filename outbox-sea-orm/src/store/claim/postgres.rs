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

use sea_orm::QueryResult;
use txoutbox_core::StoreError;
use txoutbox_core::store::LeaseToken;

use super::{AggregateKey, Walked, first_lease, publishable};
use crate::dialect::Dialect;
use crate::dialect::millis;
use crate::row::{abandon_increment, message_columns};
use crate::store::{SeaOrmOutboxStore, store_err};

/// The columns of the last aggregate the walk took messages from.
const CURSOR_TYPE: &str = "walk_last_type";
const CURSOR_ID: &str = "walk_last_id";
/// The column saying the walk went past the last aggregate.
const ENDED: &str = "walk_ended";

/// What the claim's implicit transaction runs with: no JIT, no sequential
/// scan whatever the statistics say (every step has an index path), and an
/// asynchronous commit.
const SETTINGS: &str = "SET LOCAL jit = off; SET LOCAL enable_seqscan = off; \
     SET LOCAL synchronous_commit = off;";

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
    // No row leased: the walk found nothing, or only heads other claimers
    // hold; the next walk starts from the first aggregate.
    let (last, ended) = match rows.first() {
        Some(row) => {
            let read = store_err("reading the claim");
            let last = AggregateKey {
                aggregate_type: row.try_get("", CURSOR_TYPE).map_err(&read)?,
                aggregate_id: row.try_get("", CURSOR_ID).map_err(&read)?,
            };
            (Some(last), row.try_get("", ENDED).map_err(&read)?)
        }
        None => (None, true),
    };
    Ok(Walked {
        rows,
        expires_at,
        last,
        ended,
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
///   pulling once it has them).
/// - `locked`: those publishable now, locked by primary key, skipping rows
///   another claim holds.
/// - `kept`: a message whose every earlier message of the run is locked here
///   too (as many chosen as locked rows of its aggregate up to it, counted
///   by one window over both): a row skipped, or not publishable, ends its
///   run.
/// - `walk_ended`: the walk went past the last aggregate (its count of
///   publishable heads, `found`, never reached `limit`) and no run was cut
///   by the limit (`chosen` holds fewer than `limit` rows): nothing was
///   left behind.
///
/// The CTEs are `MATERIALIZED` and joined through `= ANY (ARRAY(…))` on the
/// primary key, never to each other: with no statistics (a table never
/// analyzed) PostgreSQL once inlined `chosen` into the lock and re-ran it
/// for each of 20,000 pending rows (14 s for one claim of 500).
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
         ), chosen AS MATERIALIZED ( \
           SELECT r.id, w.aggregate_type, w.aggregate_id, r.sequence, r.free, w.step \
           FROM walk w CROSS JOIN LATERAL ( \
             SELECT e.id, e.sequence, {free_e} AS free FROM {table} e \
             WHERE e.aggregate_type = w.aggregate_type AND e.aggregate_id = w.aggregate_id \
             AND e.status <> 1 AND e.sequence >= w.sequence ORDER BY e.sequence LIMIT {limit}) r \
           WHERE w.free LIMIT {limit} \
         ), locked AS MATERIALIZED ( \
           SELECT m.id, m.aggregate_type::text AS aggregate_type, m.aggregate_id::text AS aggregate_id, \
             m.sequence FROM {table} m \
           WHERE m.id = ANY (ARRAY(SELECT c.id FROM chosen c WHERE c.free)) AND {free_m} \
           FOR UPDATE OF m SKIP LOCKED \
         ), kept AS MATERIALIZED ( \
           SELECT u.id, u.aggregate_type, u.aggregate_id, u.step FROM ( \
             SELECT x.id, x.aggregate_type, x.aggregate_id, x.is_locked, \
               max(x.step) OVER (PARTITION BY x.aggregate_type, x.aggregate_id) AS step, \
               count(*) FILTER (WHERE NOT x.is_locked) OVER upto AS chosen_upto, \
               count(*) FILTER (WHERE x.is_locked) OVER upto AS locked_upto \
             FROM (SELECT c.id, c.aggregate_type, c.aggregate_id, c.sequence, false AS is_locked, c.step \
                   FROM chosen c \
                   UNION ALL SELECT l.id, l.aggregate_type, l.aggregate_id, l.sequence, true, NULL \
                   FROM locked l) x \
             WINDOW upto AS (PARTITION BY x.aggregate_type, x.aggregate_id \
               ORDER BY x.sequence, x.is_locked ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) \
           ) u WHERE u.is_locked AND u.chosen_upto = u.locked_upto \
         ) \
         UPDATE {table} AS m SET abandoned = m.abandoned + {abandoned}, \
           lease_token = '{token}'::uuid, \
           lease_expires_at = now() + {lease_ms} * interval '1 millisecond' \
         WHERE m.id = ANY (ARRAY(SELECT k.id FROM kept k)) \
         RETURNING {columns}, m.lease_expires_at, \
           (SELECT k.aggregate_type FROM kept k ORDER BY k.step DESC LIMIT 1) AS {CURSOR_TYPE}, \
           (SELECT k.aggregate_id FROM kept k ORDER BY k.step DESC LIMIT 1) AS {CURSOR_ID}, \
           ((SELECT max(w.found) < {limit} FROM walk w) \
             AND (SELECT count(*) < {limit} FROM chosen c)) AS {ENDED}",
        head_h = head_columns("h"),
        free_e = publishable(Dialect::Postgres, "e"),
        free_m = publishable(Dialect::Postgres, "m"),
        token = token.as_uuid(),
        lease_ms = millis(lease),
        columns = message_columns(Dialect::Postgres, "m."),
        abandoned = abandon_increment("m."),
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
