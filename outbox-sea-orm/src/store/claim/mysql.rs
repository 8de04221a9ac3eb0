//! MySQL/MariaDB: the walk as a loose index scan, then heads and runs locked
//! with `SKIP LOCKED`, in one transaction at `READ COMMITTED`.
//!
//! MySQL/MariaDB reject `UPDATE … RETURNING`, `LATERAL` (MariaDB) and index
//! ranges on row values, and have no partial indexes; the
//! `(status, aggregate_type, aggregate_id, sequence)` index
//! (`<table>_heads`) keeps each status's rows in aggregate order instead, so
//! `MIN(sequence) … GROUP BY status, aggregate_type, aggregate_id` reads one
//! index entry per aggregate (a loose index scan) and never a published row.
//!
//! Why `READ COMMITTED`: under `REPEATABLE READ` a locking read sees the
//! latest row versions while a plain read sees the transaction's snapshot,
//! so a check made by a plain read (which message heads its aggregate) could
//! disagree with the rows locked. At `READ COMMITTED` every statement reads
//! what is committed when it runs.
//!
//! Every claimer locks an aggregate's head before its run (with
//! `SKIP LOCKED`), so whoever holds the head owns the run; the run's rows are
//! then locked with `SKIP LOCKED` too (a stale lease holder settling a row
//! may hold it for a moment), and a run is kept whole only if no unpublished
//! row between its head and its end was skipped (one count), else its head
//! alone is kept.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{
    AccessMode, ConnectionTrait, DatabaseTransaction, IsolationLevel, QueryResult, TransactionTrait,
};
use txoutbox_core::store::LeaseToken;
use txoutbox_core::{MessageId, StoreError};
use uuid::Uuid;

use super::{AggregateKey, Walked, publishable};
use crate::dialect::millis;
use crate::dialect::{Dialect, Sql};
use crate::row::{abandon_increment, message_columns_before_claim};
use crate::store::{SeaOrmOutboxStore, store_err};

const DIALECT: Dialect = Dialect::MySql;

/// An aggregate's head as the walk found it.
struct Head {
    key: AggregateKey,
    id: Uuid,
    sequence: i64,
}

/// Leases up to `limit` messages, walking the aggregates after `after`.
pub(super) async fn walk(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    limit: usize,
    lease: Duration,
    after: Option<&AggregateKey>,
) -> Result<Walked, StoreError> {
    let txn = begin(store).await?;
    let table = store.table();
    // Walk until `limit` heads are locked: heads another claim locked first
    // are skipped, and the walk goes on past them, so concurrent claimers
    // spread over the aggregates instead of fighting over the same heads.
    let mut heads = Vec::new();
    let mut from = after.cloned();
    let ended = loop {
        let page = heads_after(&txn, store, from.as_ref(), limit).await?;
        let seen = page.len();
        if let Some((last, _)) = page.last() {
            from = Some(last.key.clone());
        }
        let free: Vec<Head> = page
            .into_iter()
            .filter_map(|(head, free)| free.then_some(head))
            .take(limit - heads.len())
            .collect();
        heads.extend(lock_heads(&txn, &table, free).await?);
        // A short page: the scan went past the last aggregate.
        if seen < limit {
            break true;
        }
        if heads.len() >= limit {
            break false;
        }
    };
    let leased = lease_runs(&txn, store, token, lease, heads, limit, None).await?;
    commit(txn).await?;
    let last = leased.rows.last().map(|(key, _)| key.clone());
    Ok(Walked {
        rows: leased.rows.into_iter().map(|(_, row)| row).collect(),
        expires_at: leased.expires_at,
        last,
        ended: ended && !leased.cut,
    })
}

/// Leases those of `ids` that are publishable, with every earlier
/// unpublished message of their aggregate leased by this claim too.
pub(super) async fn claim_ids(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    ids: &[MessageId],
    lease: Duration,
) -> Result<(Vec<QueryResult>, Option<DateTime<Utc>>), StoreError> {
    let txn = begin(store).await?;
    let table = store.table();
    let mut sql = Sql::new(DIALECT);
    sql.push(&format!(
        "SELECT DISTINCT aggregate_type, aggregate_id FROM {table} WHERE status = 0 AND id IN "
    ))
    .bind_list(ids.iter().map(|id| *id.as_uuid()));
    let read = store_err("claiming");
    let aggregates = txn
        .query_all_raw(sql.build())
        .await
        .map_err(&read)?
        .iter()
        .map(AggregateKey::read)
        .collect::<Result<Vec<_>, _>>()
        .map_err(&read)?;
    let heads = heads_of(&txn, store, &aggregates).await?;
    let heads = lock_heads(&txn, &store.table(), heads).await?;
    let only: HashSet<Uuid> = ids.iter().map(|id| *id.as_uuid()).collect();
    let leased = lease_runs(&txn, store, token, lease, heads, ids.len(), Some(&only)).await?;
    commit(txn).await?;
    Ok((
        leased.rows.into_iter().map(|(_, row)| row).collect(),
        leased.expires_at,
    ))
}

async fn begin(store: &SeaOrmOutboxStore) -> Result<DatabaseTransaction, StoreError> {
    store
        .db
        .begin_with_config(
            Some(IsolationLevel::ReadCommitted),
            Some(AccessMode::ReadWrite),
        )
        .await
        .map_err(store_err("beginning the claim"))
}

async fn commit(txn: DatabaseTransaction) -> Result<(), StoreError> {
    txn.commit()
        .await
        .map_err(store_err("committing the claim"))
}

/// Up to `page` aggregates with a pending message, in key order after
/// `after`, each with its head and whether the head is publishable now.
async fn heads_after(
    txn: &DatabaseTransaction,
    store: &SeaOrmOutboxStore,
    after: Option<&AggregateKey>,
    page: usize,
) -> Result<Vec<(Head, bool)>, StoreError> {
    let mut sql = Sql::new(DIALECT);
    let mut filter = String::new();
    if let Some(key) = after {
        let (t1, t2, id) = (
            sql.param(key.aggregate_type.as_str()),
            sql.param(key.aggregate_type.as_str()),
            sql.param(key.aggregate_id.as_str()),
        );
        filter = format!(
            " AND (aggregate_type > {t1} OR (aggregate_type = {t2} AND aggregate_id > {id}))"
        );
    }
    let limit = sql.param(i64::try_from(page).unwrap_or(i64::MAX));
    heads(txn, store, sql, &filter, &format!(" LIMIT {limit}")).await
}

/// The heads of `aggregates` that are publishable now.
async fn heads_of(
    txn: &DatabaseTransaction,
    store: &SeaOrmOutboxStore,
    aggregates: &[AggregateKey],
) -> Result<Vec<Head>, StoreError> {
    if aggregates.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = Sql::new(DIALECT);
    let pairs: Vec<String> = aggregates
        .iter()
        .map(|key| {
            format!(
                "(aggregate_type = {} AND aggregate_id = {})",
                sql.param(key.aggregate_type.as_str()),
                sql.param(key.aggregate_id.as_str())
            )
        })
        .collect();
    let filter = format!(" AND ({})", pairs.join(" OR "));
    Ok(heads(txn, store, sql, &filter, "")
        .await?
        .into_iter()
        .filter_map(|(head, free)| free.then_some(head))
        .collect())
}

/// The loose index scan: each aggregate's lowest pending sequence, its row,
/// whether it is publishable now and no dead message comes before it.
async fn heads(
    txn: &DatabaseTransaction,
    store: &SeaOrmOutboxStore,
    mut sql: Sql,
    filter: &str,
    limit: &str,
) -> Result<Vec<(Head, bool)>, StoreError> {
    let table = store.table();
    sql.push(&format!(
        "SELECT g.aggregate_type, g.aggregate_id, h.id, g.head, \
           CAST({free_h} AND NOT EXISTS (SELECT 1 FROM {table} d WHERE d.status = 2 \
             AND d.aggregate_type = g.aggregate_type AND d.aggregate_id = g.aggregate_id \
             AND d.sequence < g.head) AS SIGNED) AS free \
         FROM (SELECT aggregate_type, aggregate_id, MIN(sequence) AS head FROM {table} \
           WHERE status = 0{filter} GROUP BY status, aggregate_type, aggregate_id \
           ORDER BY status, aggregate_type, aggregate_id{limit}) g \
         JOIN {table} h ON h.status = 0 AND h.aggregate_type = g.aggregate_type \
           AND h.aggregate_id = g.aggregate_id AND h.sequence = g.head \
         ORDER BY g.aggregate_type, g.aggregate_id",
        free_h = publishable(DIALECT, "h"),
    ));
    let read = store_err("walking the aggregates");
    let rows = txn.query_all_raw(sql.build()).await.map_err(&read)?;
    rows.iter()
        .map(|row| {
            let head = Head {
                key: AggregateKey::read(row)?,
                id: row.try_get("", "id")?,
                sequence: row.try_get("", "head")?,
            };
            let free: i64 = row.try_get("", "free")?;
            Ok((head, free == 1))
        })
        .collect::<Result<Vec<_>, sea_orm::DbErr>>()
        .map_err(read)
}

/// What [`lease_runs`] leased.
struct Leased {
    /// The leased rows in walk order, each with its aggregate.
    rows: Vec<(AggregateKey, QueryResult)>,
    /// When their lease runs out.
    expires_at: Option<DateTime<Utc>>,
    /// The limit cut the runs: rows were left behind.
    cut: bool,
}

/// Locks the runs of `heads` (locked by this claim already), keeps each run
/// up to its first message that is not publishable (or, with `only`, not
/// named), and leases what it kept.
async fn lease_runs(
    txn: &DatabaseTransaction,
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    lease: Duration,
    heads: Vec<Head>,
    limit: usize,
    only: Option<&HashSet<Uuid>>,
) -> Result<Leased, StoreError> {
    let table = store.table();
    let mut leased = Leased {
        rows: Vec::new(),
        expires_at: None,
        cut: false,
    };
    if heads.is_empty() {
        return Ok(leased);
    }
    let read = store_err("claiming");
    let locked = lock_runs(txn, &table, lease, &heads, limit).await?;
    leased.cut = locked.len() >= limit;

    // Each aggregate's run: from its head, while publishable (and named).
    let head_of: HashMap<&AggregateKey, &Head> = heads.iter().map(|h| (&h.key, h)).collect();
    let mut runs: HashMap<AggregateKey, Vec<(i64, QueryResult)>> = HashMap::new();
    let mut ended: HashSet<AggregateKey> = HashSet::new();
    for row in locked {
        let key = AggregateKey::read(&row).map_err(&read)?;
        let id: Uuid = row.try_get("", "id").map_err(&read)?;
        let sequence: i64 = row.try_get("", "sequence").map_err(&read)?;
        let free: i64 = row.try_get("", "free").map_err(&read)?;
        let Some(head) = head_of.get(&key) else {
            continue;
        };
        let run = runs.entry(key.clone()).or_default();
        let starts = run.is_empty() && id == head.id;
        let continues = !run.is_empty() && !ended.contains(&key);
        let named = only.is_none_or(|only| only.contains(&id));
        if (starts || continues) && free == 1 && named {
            run.push((sequence, row));
        } else {
            ended.insert(key);
        }
    }
    trim_skipped(txn, &table, &mut runs).await?;

    // Walk order: the heads' order.
    let mut kept = Vec::new();
    for head in &heads {
        if let Some(run) = runs.remove(&head.key) {
            kept.extend(run.into_iter().map(|(_, row)| (head.key.clone(), row)));
        }
    }
    let Some((_, first)) = kept.first() else {
        return Ok(leased);
    };
    let expires_at = DIALECT
        .time(first, "lease_until")
        .map_err(store_err("reading the lease"))?;
    let mut update = Sql::new(DIALECT);
    // `abandoned` first: MySQL evaluates SET left to right, with the values
    // already updated.
    update.push(&format!(
        "UPDATE {table} SET abandoned = abandoned + {}, lease_token = ",
        abandon_increment("")
    ));
    update.bind(*token.as_uuid()).push(", lease_expires_at = ");
    update
        .bind(DIALECT.time_value(expires_at))
        .push(" WHERE id IN ");
    let ids = kept
        .iter()
        .map(|(_, row)| row.try_get::<Uuid>("", "id"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(&read)?;
    update.bind_list(ids);
    txn.execute_raw(update.build())
        .await
        .map_err(store_err("leasing"))?;
    leased.rows = kept;
    leased.expires_at = Some(expires_at);
    Ok(leased)
}

/// Heads whose runs the first statement of a claim locks; each next
/// statement takes four times as many, until the batch is full.
const FIRST_RUNS: usize = 16;

/// Locks the runs of `heads`, in key order, up to `limit` rows: the first
/// heads' runs first, a few heads per statement, more in each next one,
/// until `limit` rows are locked or every head was asked for. MariaDB checks
/// the statement's list of runs against every row it reads, so one
/// statement for a thousand heads read each row a thousand times: behind
/// busy writers (runs hundreds of messages deep), a claim took 3-17 s and
/// the processor published 91-111 events/s. A few heads' runs usually fill
/// the batch; with one message an aggregate, four statements cover 1,000
/// heads, in 44-57 ms against 135-212 ms for the one statement (20,000
/// pending rows).
async fn lock_runs(
    txn: &DatabaseTransaction,
    table: &str,
    lease: Duration,
    heads: &[Head],
    limit: usize,
) -> Result<Vec<QueryResult>, StoreError> {
    let read = store_err("claiming");
    let mut locked = Vec::new();
    let (mut rest, mut take) = (heads, FIRST_RUNS);
    while !rest.is_empty() && locked.len() < limit {
        let (these, later) = rest.split_at(take.min(rest.len()));
        let mut sql = Sql::new(DIALECT);
        let until = {
            let lease_param = sql.param(millis(lease));
            DIALECT.now_plus_millis(&lease_param)
        };
        let runs: Vec<String> = these
            .iter()
            .map(|head| {
                format!(
                    "(m.aggregate_type = {} AND m.aggregate_id = {} AND m.sequence >= {})",
                    sql.param(head.key.aggregate_type.as_str()),
                    sql.param(head.key.aggregate_id.as_str()),
                    sql.param(head.sequence)
                )
            })
            .collect();
        // The heads' key range, when they share a type (the usual case): the
        // index range read stays between the first head and the last.
        let mut span = String::new();
        if let (Some(first), Some(last)) = (these.first(), these.last())
            && these
                .iter()
                .all(|head| head.key.aggregate_type == first.key.aggregate_type)
        {
            span = format!(
                " AND m.aggregate_type = {} AND m.aggregate_id BETWEEN {} AND {}",
                sql.param(first.key.aggregate_type.as_str()),
                sql.param(first.key.aggregate_id.as_str()),
                sql.param(last.key.aggregate_id.as_str())
            );
        }
        sql.push(&format!(
            "SELECT {columns}, CAST({free_m} AS SIGNED) AS free, {until} AS lease_until \
             FROM {table} m WHERE m.status = 0 AND ({runs}){span} \
             ORDER BY m.status, m.aggregate_type, m.aggregate_id, m.sequence LIMIT ",
            columns = message_columns_before_claim(DIALECT, "m."),
            free_m = publishable(DIALECT, "m"),
            runs = runs.join(" OR "),
        ));
        sql.bind(i64::try_from(limit - locked.len()).unwrap_or(i64::MAX))
            .push(" FOR UPDATE SKIP LOCKED");
        locked.extend(txn.query_all_raw(sql.build()).await.map_err(&read)?);
        rest = later;
        take = take.saturating_mul(4);
    }
    Ok(locked)
}

/// The heads this claim could lock and that are still publishable.
async fn lock_heads(
    txn: &DatabaseTransaction,
    table: &str,
    heads: Vec<Head>,
) -> Result<Vec<Head>, StoreError> {
    if heads.is_empty() {
        return Ok(heads);
    }
    let mut sql = Sql::new(DIALECT);
    sql.push(&format!("SELECT m.id FROM {table} m WHERE "));
    sql.push(&publishable(DIALECT, "m")).push(" AND m.id IN ");
    sql.bind_list(heads.iter().map(|head| head.id));
    sql.push(" FOR UPDATE SKIP LOCKED");
    let read = store_err("locking heads");
    let locked: HashSet<Uuid> = txn
        .query_all_raw(sql.build())
        .await
        .map_err(&read)?
        .iter()
        .map(|row| row.try_get("", "id"))
        .collect::<Result<_, _>>()
        .map_err(&read)?;
    Ok(heads
        .into_iter()
        .filter(|head| locked.contains(&head.id))
        .collect())
}

/// A run is whole only if every unpublished row between its head and its end
/// is in it; a row skipped as locked elsewhere leaves the head alone.
async fn trim_skipped(
    txn: &DatabaseTransaction,
    table: &str,
    runs: &mut HashMap<AggregateKey, Vec<(i64, QueryResult)>>,
) -> Result<(), StoreError> {
    let long: Vec<(&AggregateKey, i64, i64)> = runs
        .iter()
        .filter(|(_, run)| run.len() > 1)
        .filter_map(|(key, run)| Some((key, run.first()?.0, run.last()?.0)))
        .collect();
    if long.is_empty() {
        return Ok(());
    }
    let mut sql = Sql::new(DIALECT);
    let ranges: Vec<String> = long
        .iter()
        .map(|(key, from, to)| {
            format!(
                "(aggregate_type = {} AND aggregate_id = {} AND sequence BETWEEN {} AND {})",
                sql.param(key.aggregate_type.as_str()),
                sql.param(key.aggregate_id.as_str()),
                sql.param(*from),
                sql.param(*to)
            )
        })
        .collect();
    sql.push(&format!(
        "SELECT aggregate_type, aggregate_id, COUNT(*) AS n FROM {table} \
         WHERE status IN (0, 2) AND ({}) GROUP BY aggregate_type, aggregate_id",
        ranges.join(" OR ")
    ));
    let read = store_err("checking runs");
    let counts = txn.query_all_raw(sql.build()).await.map_err(&read)?;
    for row in &counts {
        let key = AggregateKey::read(row).map_err(&read)?;
        let n: i64 = row.try_get("", "n").map_err(&read)?;
        if let Some(run) = runs.get_mut(&key)
            && usize::try_from(n).is_ok_and(|n| n != run.len())
        {
            run.truncate(1);
        }
    }
    Ok(())
}
