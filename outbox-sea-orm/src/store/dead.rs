//! Listing dead messages for an operator: what went dead, why, and what
//! waits behind it.

use txoutbox_core::{MessageId, StoreError};

use super::SeaOrmOutboxStore;
use super::maintenance::count;
use crate::dialect::Sql;

/// A message that will not be retried, as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadMessage {
    /// The message id.
    pub id: MessageId,
    /// Its event name.
    pub event_name: String,
    /// Its aggregate.
    pub aggregate_type: String,
    /// Its aggregate.
    pub aggregate_id: String,
    /// Its position in the aggregate's history.
    pub sequence: u64,
    /// Publish attempts spent.
    pub attempts: u32,
    /// Why it is dead.
    pub last_error: Option<String>,
    /// Later messages of its aggregate not yet published: they wait behind
    /// it.
    pub waiting_behind: u64,
}

/// The oldest `limit` dead messages, with what waits behind each.
pub(super) async fn dead_messages(
    store: &SeaOrmOutboxStore,
    limit: u32,
) -> Result<Vec<DeadMessage>, StoreError> {
    let mut sql = Sql::new(store.dialect);
    let table = store.table();
    let limit = sql.param(i64::from(limit));
    sql.push(&format!(
        "SELECT d.id, d.event_name, d.aggregate_type, d.aggregate_id, d.sequence, d.attempts, \
         d.last_error, (SELECT COUNT(*) FROM {table} w WHERE w.aggregate_type = d.aggregate_type \
         AND w.aggregate_id = d.aggregate_id AND w.sequence > d.sequence AND w.status <> 1) \
         AS waiting FROM {table} d WHERE d.status = 2 ORDER BY d.id LIMIT {limit}"
    ));
    store
        .read_rows(sql.build(), "listing dead messages", |row| {
            // Read as the claim reads them (row.rs); `waiting` is a COUNT.
            let sequence: i64 = row.try_get("", "sequence")?;
            let attempts: i32 = row.try_get("", "attempts")?;
            Ok(DeadMessage {
                id: MessageId::from_uuid(row.try_get::<uuid::Uuid>("", "id")?),
                event_name: row.try_get("", "event_name")?,
                aggregate_type: row.try_get("", "aggregate_type")?,
                aggregate_id: row.try_get("", "aggregate_id")?,
                sequence: u64::try_from(sequence).unwrap_or(0),
                attempts: u32::try_from(attempts).unwrap_or(0),
                last_error: row.try_get("", "last_error")?,
                waiting_behind: count(row, "waiting")?,
            })
        })
        .await
}
