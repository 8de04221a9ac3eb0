//! Settling leased messages: complete, fail, release, renew. Each checks the
//! fencing token, so a processor whose lease was taken over changes nothing.

use std::time::Duration;

use sea_orm::ConnectionTrait;
use txoutbox_core::store::{Failure, FailureKind, LeaseOutcome, LeaseToken, Published};
use txoutbox_core::{MessageId, RetryPolicy, StoreError};

use super::{SeaOrmOutboxStore, store_err};
use crate::config::Retention;
use crate::dialect::{ASYNC_COMMIT, millis};
use crate::dialect::{Dialect, Sql};

fn outcome(asked: usize, applied: u64) -> LeaseOutcome {
    LeaseOutcome::new(applied, (asked as u64).saturating_sub(applied))
}

/// One statement for the whole batch. Fenced like the other settlements,
/// with one difference: a pending row no lease holds (its claim was lost in
/// a database crash, committed asynchronously; or the processor that took
/// it over after the lease ran out gave it back) is completed too: the
/// broker acknowledged it, and nobody else is publishing it. A row another
/// processor holds stays untouched (stale).
pub(super) async fn complete(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    published: &[Published],
) -> Result<LeaseOutcome, StoreError> {
    if published.is_empty() {
        return Ok(LeaseOutcome::default());
    }
    let dialect = store.dialect;
    let table = store.table();
    let ids = published.iter().map(|p| *p.id.as_uuid());
    let mut sql = Sql::new(dialect);
    match store.config.retention() {
        Retention::Delete => {
            sql.push(&format!(
                "{} WHERE status = 0 AND (lease_token IS NULL OR lease_token = ",
                dialect.delete_by_id(&table)
            ));
            sql.bind(*token.as_uuid())
                .push(") AND ")
                .bind_ids("id", ids);
        }
        Retention::KeepPublished if dialect == Dialect::Postgres => {
            mark_published_pg(&mut sql, &table, token, published);
        }
        Retention::KeepPublished => {
            sql.push(&format!(
                "{update} SET status = 1, published_at = {now}, lease_token = NULL, \
                 lease_expires_at = NULL",
                update = dialect.update_by_id(&table),
                now = dialect.now()
            ));
            if published.iter().any(|p| p.stream_sequence.is_some()) {
                sql.push(", stream_sequence = CASE id");
                for p in published {
                    sql.push(" WHEN ").bind(*p.id.as_uuid()).push(" THEN ");
                    sql.bind(p.stream_sequence.and_then(|s| i64::try_from(s).ok()));
                }
                sql.push(" END");
            }
            sql.push(" WHERE status = 0 AND (lease_token IS NULL OR lease_token = ");
            sql.bind(*token.as_uuid())
                .push(") AND ")
                .bind_ids("id", ids);
        }
    }
    let result = store
        .db
        .execute_raw(sql.build())
        .await
        .map_err(store_err("completing"))?;
    Ok(outcome(published.len(), result.rows_affected()))
}

/// PostgreSQL: marks `published` with their stream sequences as one
/// statement whose text is the same for every batch (ids and sequences as
/// two arrays), so it is prepared once per connection; it commits
/// asynchronously (see [`SeaOrmOutboxStore`]).
fn mark_published_pg(sql: &mut Sql, table: &str, token: LeaseToken, published: &[Published]) {
    let ids = sql.param_array(
        sea_orm::sea_query::ArrayType::Uuid,
        published.iter().map(|p| (*p.id.as_uuid()).into()),
    );
    // Arrays of BIGINT cannot hold NULL here: -1 stands for "no sequence".
    let sequences = sql.param_array(
        sea_orm::sea_query::ArrayType::BigInt,
        published.iter().map(|p| {
            p.stream_sequence
                .and_then(|s| i64::try_from(s).ok())
                .unwrap_or(-1)
                .into()
        }),
    );
    let token = sql.param(*token.as_uuid());
    sql.push(&format!(
        "UPDATE {table} AS m SET status = 1, published_at = now(), lease_token = NULL, \
         lease_expires_at = NULL, stream_sequence = nullif(p.stream_sequence, -1) \
         FROM unnest({ids}, {sequences}) AS p(id, stream_sequence), {ASYNC_COMMIT} \
         WHERE m.id = p.id AND m.status = 0 AND (m.lease_token IS NULL OR m.lease_token = {token})"
    ));
}

/// Attempts + 1; back to pending after an exponential backoff with jitter
/// (computed by the database from the row's attempts and its clock), or dead
/// when permanent or out of attempts. One statement per failure: failures
/// are the exception, and each carries its own error.
pub(super) async fn fail(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    failures: &[Failure],
    policy: &RetryPolicy,
) -> Result<LeaseOutcome, StoreError> {
    let dialect = store.dialect;
    let table = store.table();
    let mut applied = 0;
    for failure in failures {
        let mut sql = Sql::new(dialect);
        let permanent = sql.param(i32::from(failure.kind == FailureKind::Permanent));
        let max_attempts = sql.param(i64::from(policy.max_attempts.max(1)));
        let delay = backoff_millis(dialect, &mut sql, policy);
        let error = sql.param(truncate(&failure.error, 2000));
        // `status` and `next_attempt_at` come before `attempts = attempts + 1`:
        // MySQL evaluates SET left to right with the values already updated.
        sql.push(&format!(
            "UPDATE {table} SET \
             status = CASE WHEN {permanent} = 1 OR attempts + 1 >= {max_attempts} THEN 2 ELSE 0 END, \
             next_attempt_at = {next}, last_error = {error}, \
             lease_token = NULL, lease_expires_at = NULL, attempts = attempts + 1 \
             WHERE status = 0 AND id = ",
            next = dialect.now_plus_millis(&delay),
        ));
        sql.bind(*failure.id.as_uuid())
            .push(" AND lease_token = ")
            .bind(*token.as_uuid());
        let result = store
            .db
            .execute_raw(sql.build())
            .await
            .map_err(store_err("recording a failure"))?;
        applied += result.rows_affected();
    }
    Ok(outcome(failures.len(), applied))
}

/// `min(max, initial * 2^attempts) * (0.5 + random/2)` in milliseconds, as an
/// SQL expression over the row's (not yet incremented) `attempts`.
fn backoff_millis(dialect: Dialect, sql: &mut Sql, policy: &RetryPolicy) -> String {
    let initial = sql.param(millis(policy.initial_backoff).max(1));
    let max = sql.param(millis(policy.max_backoff).max(1));
    match dialect {
        Dialect::Postgres => format!(
            "(least({max}::float8, {initial}::float8 * power(2, least(attempts, 40))) * (0.5 + random() / 2))"
        ),
        Dialect::MySql => format!(
            "CAST(LEAST({max}, {initial} * POW(2, LEAST(attempts, 40))) * (0.5 + RAND() / 2) AS SIGNED)"
        ),
        Dialect::Sqlite => format!(
            "(min({max}, {initial} * (1 << min(attempts, 40))) * (0.5 + (abs(random()) % 1000000) / 2000000.0))"
        ),
    }
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Ends the lease without spending an attempt.
pub(super) async fn release(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    ids: &[MessageId],
) -> Result<LeaseOutcome, StoreError> {
    update_leased(store, token, ids, "releasing", |_| {
        "lease_token = NULL, lease_expires_at = NULL".to_owned()
    })
    .await
}

/// Extends the lease of those of `ids` still carrying `token`.
pub(super) async fn renew(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    ids: &[MessageId],
    lease: Duration,
) -> Result<LeaseOutcome, StoreError> {
    update_leased(store, token, ids, "renewing a lease", |sql| {
        let lease = sql.param(millis(lease));
        format!(
            "lease_expires_at = {}",
            store.dialect.now_plus_millis(&lease)
        )
    })
    .await
}

/// `UPDATE table SET <assignments> WHERE` the row is pending, carries
/// `token` and is one of `ids`: the fenced update release and renew share.
/// `assignments` may bind parameters (they come before the token's).
async fn update_leased(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    ids: &[MessageId],
    doing: &'static str,
    assignments: impl FnOnce(&mut Sql) -> String,
) -> Result<LeaseOutcome, StoreError> {
    if ids.is_empty() {
        return Ok(LeaseOutcome::default());
    }
    let mut sql = Sql::new(store.dialect);
    let set = assignments(&mut sql);
    sql.push(&format!(
        "{} SET {set} WHERE status = 0 AND lease_token = ",
        store.dialect.update_by_id(&store.table())
    ));
    sql.bind(*token.as_uuid()).push(" AND ");
    sql.bind_ids("id", ids.iter().map(|id| *id.as_uuid()));
    let result = store
        .db
        .execute_raw(sql.build())
        .await
        .map_err(store_err(doing))?;
    Ok(outcome(ids.len(), result.rows_affected()))
}
