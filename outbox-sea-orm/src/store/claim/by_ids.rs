//! PostgreSQL and SQLite: the claim by ids, one statement. On PostgreSQL it
//! is a prepared statement whose text is the same for any number of ids (one
//! array parameter): its plan starts from the primary key whatever the table
//! holds, so it is planned once per connection, not per claim.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::ArrayType;
use sea_orm::{ConnectionTrait, QueryResult};
use txoutbox_core::store::LeaseToken;
use txoutbox_core::{MessageId, StoreError};

use super::{first_lease, publishable};
use crate::dialect::{ASYNC_COMMIT, millis};
use crate::dialect::{Dialect, Sql};
use crate::row::{abandon_increment, message_columns};
use crate::store::{SeaOrmOutboxStore, store_err};

/// Leases those of `ids` that are publishable and whose every earlier
/// unpublished message of the aggregate is among the rows this statement
/// locks.
pub(super) async fn claim(
    store: &SeaOrmOutboxStore,
    token: LeaseToken,
    ids: &[MessageId],
    lease: Duration,
) -> Result<(Vec<QueryResult>, Option<DateTime<Utc>>), StoreError> {
    let dialect = store.dialect;
    let table = store.table();
    let (lock, probe_limit, async_commit) = match dialect {
        // `OFFSET 0` keeps each probe a per-candidate subplan on the partial
        // `<table>_unpublished` index (as an anti-join the planner may hash
        // over a scan of the table).
        Dialect::Postgres => (
            " FOR UPDATE OF m SKIP LOCKED",
            " OFFSET 0",
            format!(", {ASYNC_COMMIT}"),
        ),
        _ => ("", "", String::new()),
    };
    let mut sql = Sql::new(dialect);
    let only = match dialect {
        Dialect::Postgres => {
            let array =
                sql.param_array(ArrayType::Uuid, ids.iter().map(|id| (*id.as_uuid()).into()));
            format!("m.id = ANY({array})")
        }
        _ => {
            let placeholders: Vec<String> = ids.iter().map(|id| sql.param(*id.as_uuid())).collect();
            format!("m.id IN ({})", placeholders.join(", "))
        }
    };
    let token_param = sql.param(*token.as_uuid());
    let lease_param = sql.param(millis(lease));
    let until = dialect.now_plus_millis(&lease_param);
    let publishable_m = publishable(dialect, "m");
    let now = dialect.now();
    sql.push(&format!(
        "WITH candidates AS ( \
           SELECT m.id, m.aggregate_type, m.aggregate_id, m.sequence FROM {table} m \
           WHERE {only} AND {publishable_m} \
           AND NOT EXISTS (SELECT 1 FROM {table} e \
             WHERE e.aggregate_type = m.aggregate_type AND e.aggregate_id = m.aggregate_id \
             AND e.sequence < m.sequence AND e.status <> 1 \
             AND (e.status = 2 OR e.next_attempt_at > {now} OR e.lease_expires_at > {now}){probe_limit}){lock} \
         ), claimable AS ( \
           SELECT c.id AS claim_id FROM candidates c WHERE NOT EXISTS ( \
             SELECT 1 FROM {table} e \
             WHERE e.aggregate_type = c.aggregate_type AND e.aggregate_id = c.aggregate_id \
             AND e.sequence < c.sequence AND e.status <> 1 \
             AND e.id NOT IN (SELECT id FROM candidates){probe_limit}) \
         ) \
         UPDATE {table} AS m SET abandoned = m.abandoned + {abandoned}, \
           lease_token = {token_param}, lease_expires_at = {until} \
         FROM claimable{async_commit} WHERE m.id = claimable.claim_id \
         RETURNING {columns}, lease_expires_at",
        columns = message_columns(dialect, ""),
        abandoned = abandon_increment("m."),
    ));
    let rows = store
        .db
        .query_all_raw(sql.build())
        .await
        .map_err(store_err("claiming"))?;
    let expires_at = first_lease(dialect, &rows, "lease_expires_at")?;
    Ok((rows, expires_at))
}
