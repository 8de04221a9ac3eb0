//! Claiming a batch under a lease, in per-aggregate order.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use outbox_core::{ClaimedBatch, ClaimedMessage, Lease, LeaseToken, MessageId, StoreError};
use sea_orm::sea_query::ArrayType;
use sea_orm::{ConnectionTrait, QueryResult, TransactionTrait};
use uuid::Uuid;

use super::{ASYNC_COMMIT, SeaOrmOutboxStore, millis, store_err};
use crate::dialect::{Dialect, Sql};
use crate::row::{message_columns, read_message};

/// Leases up to `limit` publishable messages; only those in `only` when given
/// (the processor's fast path, by primary key).
pub(super) async fn claim(
    store: &SeaOrmOutboxStore,
    limit: u32,
    lease: Duration,
    only: Option<&[MessageId]>,
) -> Result<ClaimedBatch, StoreError> {
    let token = LeaseToken::new();
    if only.is_some_and(<[MessageId]>::is_empty) {
        return Ok(ClaimedBatch {
            lease: Lease {
                token,
                expires_at: Utc::now(),
            },
            messages: Vec::new(),
        });
    }
    let limit = i64::from(limit.max(1));
    let (rows, expires_at) = match store.dialect {
        Dialect::Postgres | Dialect::Sqlite => {
            claim_in_one_statement(store, token, limit, lease, only).await?
        }
        Dialect::MySql => claim_in_a_transaction(store, token, limit, lease, only).await?,
    };
    let mut messages = rows
        .iter()
        .map(|row| {
            read_message(store.dialect, row)
                .map(|(message, attempts)| ClaimedMessage { message, attempts })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(store_err("reading claimed rows"))?;
    ClaimedMessage::sort_for_publishing(&mut messages);
    let expires_at = expires_at.unwrap_or_else(Utc::now);
    tracing::trace!(claimed = messages.len(), %token, "outbox claim");
    Ok(ClaimedBatch {
        lease: Lease { token, expires_at },
        messages,
    })
}

/// The part of the claim shared by every backend: pending, due, unleased,
/// and every earlier unpublished message of the aggregate claimable too.
fn eligible(dialect: Dialect, table: &str) -> String {
    let now = dialect.now();
    let (unpublished, fence) = fence(dialect);
    format!(
        "m.status = 0 AND m.next_attempt_at <= {now} \
         AND (m.lease_expires_at IS NULL OR m.lease_expires_at <= {now}) \
         AND NOT EXISTS (SELECT 1 FROM {table} e \
             WHERE e.aggregate_type = m.aggregate_type AND e.aggregate_id = m.aggregate_id \
             AND e.sequence < m.sequence AND {unpublished} \
             AND (e.status = 2 OR e.next_attempt_at > {now} OR e.lease_expires_at > {now}){fence})"
    )
}

/// How a claim probes "an earlier message of the aggregate is unpublished":
/// on PostgreSQL `OFFSET 0` keeps each probe a per-candidate subplan on the
/// partial `<table>_unpublished` index. As anti-joins the planner, expecting
/// about one blocking row, materializes a sequential scan of the whole table
/// (published rows included) or hash-joins over one once the limit nears
/// 1,000: 105 ms of a 117 ms claim of 500 on 200,000 rows.
fn fence(dialect: Dialect) -> (&'static str, &'static str) {
    match dialect {
        Dialect::Postgres => ("e.status <> 1", " OFFSET 0"),
        _ => ("e.status IN (0, 2)", ""),
    }
}

/// ` AND m.id IN (...)` when the claim is limited to `only` (on PostgreSQL
/// ` AND m.id = ANY($n)`, one array parameter); binds the ids (so call it
/// where the clause's placeholders fall in the statement).
fn only_ids(sql: &mut Sql, only: Option<&[MessageId]>) -> String {
    let Some(ids) = only else {
        return String::new();
    };
    let ids = ids.iter().map(|id| *id.as_uuid());
    if sql.dialect() == Dialect::Postgres {
        let array = sql.param_array(ArrayType::Uuid, ids.map(Into::into));
        return format!(" AND m.id = ANY({array})");
    }
    let placeholders: Vec<String> = ids.map(|id| sql.param(id)).collect();
    format!(" AND m.id IN ({})", placeholders.join(", "))
}

/// PostgreSQL and SQLite: lock, check and lease in one statement. On
/// PostgreSQL the ordinary claim is planned with its values every time (see
/// [`planned_each_time`]), so a generic plan cached while the table was small
/// can never make it slow later. The claim by ids (the fast path, many small
/// claims a second) is a prepared statement whose text is the same for any
/// number of ids: its plan starts from the primary key whatever the table
/// holds, so it is planned once per connection, not per claim.
async fn claim_in_one_statement(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    limit: i64,
    lease: Duration,
    only: Option<&[MessageId]>,
) -> Result<(Vec<QueryResult>, Option<DateTime<Utc>>), StoreError> {
    let dialect = store.dialect;
    let table = store.table();
    let lock = match dialect {
        Dialect::Postgres => " FOR UPDATE OF m SKIP LOCKED",
        _ => "",
    };
    let mut sql = Sql::new(dialect);
    let by_ids = only.is_some();
    let only = only_ids(&mut sql, only);
    let limit = sql.param(limit);
    let token_param = sql.param(*token.as_uuid());
    let lease_param = sql.param(millis(lease));
    let until = dialect.now_plus_millis(&lease_param);
    let (unpublished, fence) = fence(dialect);
    sql.push(&format!(
        "WITH candidates AS ( \
           SELECT m.id, m.aggregate_type, m.aggregate_id, m.sequence FROM {table} m \
           WHERE {eligible}{only} ORDER BY m.id LIMIT {limit}{lock} \
         ), claimable AS ( \
           SELECT c.id AS claim_id FROM candidates c WHERE NOT EXISTS ( \
             SELECT 1 FROM {table} e \
             WHERE e.aggregate_type = c.aggregate_type AND e.aggregate_id = c.aggregate_id \
             AND e.sequence < c.sequence AND {unpublished} \
             AND e.id NOT IN (SELECT id FROM candidates){fence}) \
         ) \
         UPDATE {table} AS m SET lease_token = {token_param}, lease_expires_at = {until} \
         FROM claimable{async_commit} WHERE m.id = claimable.claim_id \
         RETURNING {columns}, lease_expires_at",
        eligible = eligible(dialect, &table),
        columns = message_columns(dialect, ""),
        async_commit = match dialect {
            Dialect::Postgres => format!(", {ASYNC_COMMIT}"),
            _ => String::new(),
        },
    ));
    let statement = sql.build();
    let rows = if dialect == Dialect::Postgres && !by_ids {
        planned_each_time(&store.db, statement).await?
    } else {
        store
            .db
            .query_all_raw(statement)
            .await
            .map_err(store_err("claiming"))?
    };
    let expires_at = match rows.first() {
        Some(row) => dialect
            .time_opt(row, "lease_expires_at")
            .map_err(store_err("reading the lease"))?,
        None => None,
    };
    Ok((rows, expires_at))
}

/// PostgreSQL: runs the claim as one *unnamed* statement, which the server
/// plans with its actual values every time. A named prepared statement could
/// fall back to a generic plan cached while the table was nearly empty, and
/// that plan made claims take seconds once the table had grown (see the
/// store's plan-regression test). One round trip, no transaction around it.
#[cfg(feature = "postgres")]
async fn planned_each_time(
    db: &sea_orm::DatabaseConnection,
    statement: sea_orm::Statement,
) -> Result<Vec<QueryResult>, StoreError> {
    use sea_orm::{Value, sqlx};
    let mut query = sqlx::query(sqlx::AssertSqlSafe(statement.sql));
    for value in statement.values.map(|values| values.0).unwrap_or_default() {
        query = match value {
            Value::Uuid(uuid) => query.bind(uuid),
            Value::BigInt(int) => query.bind(int),
            other => {
                return Err(StoreError::msg(format!(
                    "claim: no binding for parameter {other:?}"
                )));
            }
        };
    }
    let rows = query
        .persistent(false)
        .fetch_all(db.get_postgres_connection_pool())
        .await
        .map_err(|err| StoreError::new("claiming", err))?;
    Ok(rows.into_iter().map(QueryResult::from).collect())
}

#[cfg(not(feature = "postgres"))]
async fn planned_each_time(
    _db: &sea_orm::DatabaseConnection,
    _statement: sea_orm::Statement,
) -> Result<Vec<QueryResult>, StoreError> {
    Err(StoreError::msg(
        "PostgreSQL support is not compiled in (feature `postgres`)",
    ))
}

/// MySQL/MariaDB reject `UPDATE … RETURNING` and `IN (SELECT … LIMIT)`:
/// lock the candidates with `SELECT … FOR UPDATE SKIP LOCKED`, check their
/// earlier siblings, lease the survivors, all in one transaction.
async fn claim_in_a_transaction(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    limit: i64,
    lease: Duration,
    only: Option<&[MessageId]>,
) -> Result<(Vec<QueryResult>, Option<DateTime<Utc>>), StoreError> {
    let dialect = store.dialect;
    let table = store.table();
    let txn = store
        .db
        .begin()
        .await
        .map_err(store_err("beginning the claim"))?;

    let mut select = Sql::new(dialect);
    let until = {
        let lease_param = select.param(millis(lease));
        dialect.now_plus_millis(&lease_param)
    };
    let only = only_ids(&mut select, only);
    select.push(&format!(
        "SELECT {columns}, {until} AS lease_until FROM {table} m WHERE {eligible}{only} \
         ORDER BY m.id LIMIT ",
        columns = message_columns(dialect, "m."),
        eligible = eligible(dialect, &table),
    ));
    select.bind(limit).push(" FOR UPDATE SKIP LOCKED");
    let candidates = txn
        .query_all_raw(select.build())
        .await
        .map_err(store_err("claiming"))?;
    let keys = candidates
        .iter()
        .map(row_key)
        .collect::<Result<Vec<_>, _>>()
        .map_err(store_err("reading claim candidates"))?;
    let keep = keep_in_order(&txn, dialect, &table, &keys).await?;
    if keep.is_empty() {
        txn.commit()
            .await
            .map_err(store_err("committing the claim"))?;
        return Ok((Vec::new(), None));
    }

    let expires_at = dialect
        .time(&candidates[keep[0]], "lease_until")
        .map_err(store_err("reading the lease"))?;
    let mut update = Sql::new(dialect);
    update.push(&format!("UPDATE {table} SET lease_token = "));
    update.bind(*token.as_uuid()).push(", lease_expires_at = ");
    update
        .bind(dialect.time_value(expires_at))
        .push(" WHERE id IN ");
    update.bind_list(keep.iter().map(|&i| keys[i].id));
    txn.execute_raw(update.build())
        .await
        .map_err(store_err("leasing"))?;
    txn.commit()
        .await
        .map_err(store_err("committing the claim"))?;

    let kept: HashSet<usize> = keep.into_iter().collect();
    let rows = candidates
        .into_iter()
        .enumerate()
        .filter(|(i, _)| kept.contains(i))
        .map(|(_, row)| row)
        .collect();
    Ok((rows, Some(expires_at)))
}

/// Where a row sits in its aggregate's history.
struct RowKey {
    id: Uuid,
    aggregate: (String, String),
    sequence: i64,
}

fn row_key(row: &QueryResult) -> Result<RowKey, sea_orm::DbErr> {
    Ok(RowKey {
        id: row.try_get("", "id")?,
        aggregate: (
            row.try_get("", "aggregate_type")?,
            row.try_get("", "aggregate_id")?,
        ),
        sequence: row.try_get("", "sequence")?,
    })
}

/// The indexes of the locked `candidates` to keep: those whose every earlier
/// unpublished sibling is locked by this claim too.
async fn keep_in_order(
    txn: &impl ConnectionTrait,
    dialect: Dialect,
    table: &str,
    candidates: &[RowKey],
) -> Result<Vec<usize>, StoreError> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let locked: HashSet<Uuid> = candidates.iter().map(|k| k.id).collect();
    let aggregates: HashSet<&(String, String)> = candidates.iter().map(|k| &k.aggregate).collect();
    let mut siblings = Sql::new(dialect);
    siblings.push(&format!(
        "SELECT id, aggregate_type, aggregate_id, sequence FROM {table} WHERE status IN (0, 2) AND ("
    ));
    for (i, (aggregate_type, aggregate_id)) in aggregates.iter().enumerate() {
        if i > 0 {
            siblings.push(" OR ");
        }
        siblings
            .push("(aggregate_type = ")
            .bind(aggregate_type.as_str());
        siblings
            .push(" AND aggregate_id = ")
            .bind(aggregate_id.as_str())
            .push(")");
    }
    siblings.push(")");
    let read = store_err("checking order");
    let rows = txn.query_all_raw(siblings.build()).await.map_err(&read)?;
    // The smallest sequence of each aggregate held outside this claim.
    let mut held_elsewhere: HashMap<(String, String), i64> = HashMap::new();
    for row in &rows {
        let key = row_key(row).map_err(&read)?;
        if locked.contains(&key.id) {
            continue;
        }
        held_elsewhere
            .entry(key.aggregate)
            .and_modify(|s| *s = (*s).min(key.sequence))
            .or_insert(key.sequence);
    }
    Ok(candidates
        .iter()
        .enumerate()
        .filter(|(_, key)| {
            held_elsewhere
                .get(&key.aggregate)
                .is_none_or(|first| key.sequence < *first)
        })
        .map(|(i, _)| i)
        .collect())
}
