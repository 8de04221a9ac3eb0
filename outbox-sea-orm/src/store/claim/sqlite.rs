//! SQLite: the walk and the lease in one statement (SQLite has one writer,
//! so no claim can hold a row another claim wants).

use std::time::Duration;

use sea_orm::ConnectionTrait;
use txoutbox_core::StoreError;
use txoutbox_core::store::LeaseToken;

use super::{AggregateKey, Walked, first_lease, publishable};
use crate::dialect::millis;
use crate::dialect::{Dialect, Sql};
use crate::row::{abandon_increment, message_columns};
use crate::store::{SeaOrmOutboxStore, store_err};

const DIALECT: Dialect = Dialect::Sqlite;

/// Leases up to `limit` messages, walking the aggregates after `after`.
pub(super) async fn walk(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    limit: usize,
    lease: Duration,
    after: Option<&AggregateKey>,
) -> Result<Walked, StoreError> {
    let sql = statement(store, token, limit, lease, after);
    let rows = store
        .db
        .query_all_raw(sql.build())
        .await
        .map_err(store_err("claiming"))?;
    let expires_at = first_lease(DIALECT, &rows, "lease_expires_at")?;
    // SQLite compares text byte by byte, as Rust does: the walk's last
    // aggregate is the greatest key claimed.
    let read = store_err("reading the claim");
    let mut last: Option<AggregateKey> = None;
    for row in &rows {
        let key = AggregateKey::read(row).map_err(&read)?;
        let greater = last.as_ref().is_none_or(|l| {
            (&key.aggregate_type, &key.aggregate_id) > (&l.aggregate_type, &l.aggregate_id)
        });
        if greater {
            last = Some(key);
        }
    }
    // One writer at a time: no row is skipped as locked, so a claim short
    // of its limit is one whose walk found no more heads (or, rarely, one
    // whose runs a delayed message cut: the next walk then starts from the
    // first aggregate, and the processor waits for its poll).
    let ended = rows.len() < limit;
    Ok(Walked {
        rows,
        expires_at,
        last,
        ended,
    })
}

/// `EXPLAIN QUERY PLAN` of an ordinary claim of `limit` from the first
/// aggregate, one line per step: the plan tests read its shape.
pub(super) async fn explain(store: &SeaOrmOutboxStore, limit: usize) -> Result<String, StoreError> {
    let claim = statement(
        store,
        LeaseToken::new(),
        limit,
        Duration::from_secs(30),
        None,
    );
    let (mut explain, text) = Sql::embedding(claim.build());
    explain.push("EXPLAIN QUERY PLAN ").push(&text);
    let read = store_err("explaining the claim");
    let rows = store
        .db
        .query_all_raw(explain.build())
        .await
        .map_err(&read)?;
    let lines = rows
        .iter()
        .map(|row| row.try_get::<String>("", "detail"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)?;
    Ok(lines.join("\n"))
}

/// The rowid of the head of the first aggregate after `(type, id)`, by two
/// range seeks on the partial `<table>_unpublished` index: the next id of
/// the same type, else the first id of the next type. (SQLite does not seek
/// a row-value range `(type, id) > (…, …)` whose right side comes from the
/// outer query: it scans from the type's first row.)
fn next_head(table: &str, aggregate_type: &str, aggregate_id: &str, same_type: &str) -> String {
    let order = "ORDER BY x.aggregate_type, x.aggregate_id, x.sequence LIMIT 1";
    format!(
        "COALESCE( \
           (SELECT x.rowid FROM {table} x WHERE x.status <> 1 AND x.aggregate_type = {aggregate_type} \
            AND x.aggregate_id > {aggregate_id} {order}), \
           (SELECT x.rowid FROM {table} x WHERE x.status <> 1 AND x.aggregate_type > {same_type} {order}))"
    )
}

/// The claim:
/// - `walk`: one row per aggregate with an unpublished message, its head,
///   found through the partial `<table>_unpublished` index (see
///   [`next_head`]), until `limit` heads are publishable;
/// - `chosen`: from each publishable head (`CROSS JOIN` keeps the heads the
///   outer loop, so runs come out in walk order, each in sequence order), its
///   unpublished messages, `limit` in all;
/// - `kept`: the messages before the first one of its run that is not
///   publishable.
fn statement(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    limit: usize,
    lease: Duration,
    after: Option<&AggregateKey>,
) -> Sql {
    let table = store.table();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // SQLite's placeholders are positional: bind in the order they appear.
    let mut sql = Sql::new(DIALECT);
    let first_head = match after {
        Some(key) => {
            let (t1, id, t2) = (
                sql.param(key.aggregate_type.as_str()),
                sql.param(key.aggregate_id.as_str()),
                sql.param(key.aggregate_type.as_str()),
            );
            next_head(&table, &t1, &id, &t2)
        }
        None => format!(
            "(SELECT x.rowid FROM {table} x WHERE x.status <> 1 \
             ORDER BY x.aggregate_type, x.aggregate_id, x.sequence LIMIT 1)"
        ),
    };
    let walk_limit = sql.param(limit);
    let run_limit = sql.param(limit);
    let token_param = sql.param(*token.as_uuid());
    let lease_param = sql.param(millis(lease));
    sql.push(&format!(
        "WITH RECURSIVE walk (aggregate_type, aggregate_id, sequence, free, found) AS ( \
           SELECT h.aggregate_type, h.aggregate_id, h.sequence, {free_h}, {free_h} FROM {table} h \
           WHERE h.rowid = {first_head} \
           UNION ALL \
           SELECT n.aggregate_type, n.aggregate_id, n.sequence, {free_n}, w.found + {free_n} \
           FROM walk w JOIN {table} n ON n.rowid = {next} \
           WHERE w.found < {walk_limit} \
         ), chosen AS ( \
           SELECT e.id, e.aggregate_type, e.aggregate_id, e.sequence, {free_e} AS free \
           FROM walk hd CROSS JOIN {table} e \
           WHERE hd.free AND e.aggregate_type = hd.aggregate_type AND e.aggregate_id = hd.aggregate_id \
           AND e.status <> 1 AND e.sequence >= hd.sequence LIMIT {run_limit} \
         ), kept AS ( \
           SELECT id FROM (SELECT id, free, sequence, MIN(CASE WHEN free THEN NULL ELSE sequence END) \
             OVER (PARTITION BY aggregate_type, aggregate_id) AS run_end FROM chosen) \
           WHERE free AND (run_end IS NULL OR sequence < run_end) \
         ) \
         UPDATE {table} SET abandoned = abandoned + {abandoned}, lease_token = {token_param}, \
           lease_expires_at = {until} \
         WHERE id IN (SELECT id FROM kept) \
         RETURNING {columns}, lease_expires_at",
        next = next_head(&table, "w.aggregate_type", "w.aggregate_id", "w.aggregate_type"),
        free_h = publishable(DIALECT, "h"),
        free_n = publishable(DIALECT, "n"),
        free_e = publishable(DIALECT, "e"),
        until = DIALECT.now_plus_millis(&lease_param),
        columns = message_columns(DIALECT, ""),
        abandoned = abandon_increment(""),
    ));
    sql
}
