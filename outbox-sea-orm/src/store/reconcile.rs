//! What `outbox verify` reads from the table: the rows marked published
//! (to find each in the stream) and the rows pending for too long, as the
//! store's own methods and as [`TableRecords`] (the store's and the
//! [`Outbox`]'s), which `txoutbox_nats::verify_stream` reads. Plain
//! reads by the `(status, published_at)` and pending indexes; the claim and
//! the completion are not involved.

use std::time::Duration;

use sea_orm::QueryResult;
use txoutbox_core::MessageId;
use txoutbox_core::StoreError;
use txoutbox_core::verify::{PublishedRecord, StalePending, TableRecords};

use super::SeaOrmOutboxStore;
use crate::Outbox;
use crate::dialect::{Sql, millis};

impl SeaOrmOutboxStore {
    /// The rows marked published, with their recorded stream sequence: all
    /// of them, or those published within `within` (by the database clock),
    /// in publishing order. Skipped messages (settled unpublished by an
    /// operator) are not among them. With `Retention::Delete` published rows
    /// are gone, so there is nothing to read.
    pub async fn published_records(
        &self,
        within: Option<Duration>,
    ) -> Result<Vec<PublishedRecord>, StoreError> {
        let dialect = self.dialect;
        let mut sql = Sql::new(dialect);
        // `status = 1` is settled; a skipped message was never published.
        let mut filter = "status = 1 AND skipped_at IS NULL".to_owned();
        if let Some(within) = within {
            let ago = sql.param(-millis(within));
            filter.push_str(&format!(
                " AND published_at >= {}",
                dialect.now_plus_millis(&ago)
            ));
        }
        sql.push(&format!(
            "SELECT id, aggregate_type, aggregate_id, sequence, stream_sequence FROM {} \
             WHERE {filter} ORDER BY published_at, id",
            self.table()
        ));
        self.read_rows(sql.build(), "reading published rows", |row| {
            let stream_sequence: Option<i64> = row.try_get("", "stream_sequence")?;
            Ok(PublishedRecord {
                id: id(row)?,
                aggregate_type: row.try_get("", "aggregate_type")?,
                aggregate_id: row.try_get("", "aggregate_id")?,
                sequence: sequence(row)?,
                stream_sequence: stream_sequence.and_then(|s| u64::try_from(s).ok()),
            })
        })
        .await
    }

    /// The oldest `limit` pending rows written more than `older_than` ago
    /// (by the database clock), oldest first.
    pub async fn stale_pending(
        &self,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<StalePending>, StoreError> {
        let dialect = self.dialect;
        let mut sql = Sql::new(dialect);
        let ago = sql.param(-millis(older_than));
        let cutoff = dialect.now_plus_millis(&ago);
        let limit = sql.param(i64::from(limit));
        sql.push(&format!(
            "SELECT id, event_name, aggregate_type, aggregate_id, sequence, attempts, created_at, \
             {now} AS db_now FROM {table} WHERE status = 0 AND created_at < {cutoff} \
             ORDER BY id LIMIT {limit}",
            now = dialect.now(),
            table = self.table(),
        ));
        self.read_rows(sql.build(), "reading stale pending rows", |row| {
            let attempts: i32 = row.try_get("", "attempts")?;
            let created = dialect.time(row, "created_at")?;
            let now = dialect.time(row, "db_now")?;
            Ok(StalePending {
                id: id(row)?,
                event_name: row.try_get("", "event_name")?,
                aggregate_type: row.try_get("", "aggregate_type")?,
                aggregate_id: row.try_get("", "aggregate_id")?,
                sequence: sequence(row)?,
                attempts: u32::try_from(attempts).unwrap_or(0),
                age: (now - created).to_std().unwrap_or_default(),
            })
        })
        .await
    }
}

impl TableRecords for SeaOrmOutboxStore {
    async fn published_records(
        &self,
        within: Option<Duration>,
    ) -> Result<Vec<PublishedRecord>, StoreError> {
        SeaOrmOutboxStore::published_records(self, within).await
    }

    async fn stale_pending(
        &self,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<StalePending>, StoreError> {
        SeaOrmOutboxStore::stale_pending(self, older_than, limit).await
    }
}

/// Its store's rows.
impl TableRecords for Outbox {
    async fn published_records(
        &self,
        within: Option<Duration>,
    ) -> Result<Vec<PublishedRecord>, StoreError> {
        self.store().published_records(within).await
    }

    async fn stale_pending(
        &self,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<StalePending>, StoreError> {
        self.store().stale_pending(older_than, limit).await
    }
}

fn id(row: &QueryResult) -> Result<MessageId, sea_orm::DbErr> {
    Ok(MessageId::from_uuid(row.try_get::<uuid::Uuid>("", "id")?))
}

/// Read as the claim reads it (row.rs).
fn sequence(row: &QueryResult) -> Result<u64, sea_orm::DbErr> {
    let sequence: i64 = row.try_get("", "sequence")?;
    Ok(u64::try_from(sequence).unwrap_or(0))
}
