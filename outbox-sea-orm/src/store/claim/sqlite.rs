//! SQLite: the walk and the lease in one statement (SQLite has one writer,
//! so no claim can hold a row another claim wants).

use std::time::Duration;

use outbox_core::{LeaseToken, StoreError};
use sea_orm::ConnectionTrait;

use super::{AggregateKey, Walked, first_lease, publishable};
use crate::dialect::{Dialect, Sql};
use crate::row::message_columns;
use crate::store::{SeaOrmOutboxStore, millis, store_err};

/// Leases up to `limit` messages, walking the aggregates after `after`.
///
/// - `walk`: one row per aggregate with an unpublished message, its head,
///   found through the partial `<table>_unpublished` index with a row-value
///   range (`(type, id) > (previous type, previous id)`), until `limit`
///   heads are publishable;
/// - `chosen`: from each publishable head (`CROSS JOIN` keeps the heads the
///   outer loop, so runs come out in walk order, each in sequence order), its
///   unpublished messages, `limit` in all;
/// - `kept`: the messages before the first one of its run that is not
///   publishable.
pub(super) async fn walk(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    limit: usize,
    lease: Duration,
    after: Option<&AggregateKey>,
) -> Result<Walked, StoreError> {
    let dialect = Dialect::Sqlite;
    let table = store.table();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut sql = Sql::new(dialect);
    let first = match after {
        Some(key) => format!(
            "x.status <> 1 AND (x.aggregate_type, x.aggregate_id) > ({}, {})",
            sql.param(key.aggregate_type.as_str()),
            sql.param(key.aggregate_id.as_str())
        ),
        None => "x.status <> 1".to_owned(),
    };
    let walk_limit = sql.param(limit);
    let run_limit = sql.param(limit);
    let token_param = sql.param(*token.as_uuid());
    let lease_param = sql.param(millis(lease));
    let order = "ORDER BY x.aggregate_type, x.aggregate_id, x.sequence LIMIT 1";
    sql.push(&format!(
        "WITH RECURSIVE walk (aggregate_type, aggregate_id, sequence, free, found) AS ( \
           SELECT h.aggregate_type, h.aggregate_id, h.sequence, {free_h}, {free_h} FROM {table} h \
           WHERE h.rowid = (SELECT x.rowid FROM {table} x WHERE {first} {order}) \
           UNION ALL \
           SELECT n.aggregate_type, n.aggregate_id, n.sequence, {free_n}, w.found + {free_n} \
           FROM walk w JOIN {table} n ON n.rowid = (SELECT x.rowid FROM {table} x WHERE x.status <> 1 \
             AND (x.aggregate_type, x.aggregate_id) > (SELECT w.aggregate_type, w.aggregate_id) {order}) \
           WHERE w.found < {walk_limit} \
         ), chosen AS ( \
           SELECT e.id, e.aggregate_type, e.aggregate_id, e.sequence, {free_e} AS free \
           FROM walk h CROSS JOIN {table} e \
           WHERE h.free AND e.aggregate_type = h.aggregate_type AND e.aggregate_id = h.aggregate_id \
           AND e.status <> 1 AND e.sequence >= h.sequence LIMIT {run_limit} \
         ), kept AS ( \
           SELECT id FROM (SELECT id, free, sequence, MIN(CASE WHEN free THEN NULL ELSE sequence END) \
             OVER (PARTITION BY aggregate_type, aggregate_id) AS run_end FROM chosen) \
           WHERE free AND (run_end IS NULL OR sequence < run_end) \
         ) \
         UPDATE {table} SET lease_token = {token_param}, lease_expires_at = {until} \
         WHERE id IN (SELECT id FROM kept) \
         RETURNING {columns}, lease_expires_at",
        free_h = publishable(dialect, "h"),
        free_n = publishable(dialect, "n"),
        free_e = publishable(dialect, "e"),
        until = dialect.now_plus_millis(&lease_param),
        columns = message_columns(dialect, ""),
    ));
    let rows = store
        .db
        .query_all_raw(sql.build())
        .await
        .map_err(store_err("claiming"))?;
    let expires_at = first_lease(dialect, &rows, "lease_expires_at")?;
    // SQLite compares text byte by byte, as Rust does: the walk's last
    // aggregate is the greatest key claimed.
    let read = store_err("reading the claim");
    let mut last: Option<AggregateKey> = None;
    for row in &rows {
        let key = AggregateKey {
            aggregate_type: row.try_get("", "aggregate_type").map_err(&read)?,
            aggregate_id: row.try_get("", "aggregate_id").map_err(&read)?,
        };
        let greater = last.as_ref().is_none_or(|l| {
            (&key.aggregate_type, &key.aggregate_id) > (&l.aggregate_type, &l.aggregate_id)
        });
        if greater {
            last = Some(key);
        }
    }
    Ok(Walked {
        rows,
        expires_at,
        last,
    })
}
