//! Skipping a dead message: settled without a publish, kept with who, why
//! and when, so its aggregate moves on.
//!
//! A skipped row is `status` 1 like a published one (with `skipped_at` set,
//! `published_at` the time of the skip and no `stream_sequence`): the claim,
//! its walk index and the by-id claim treat every `status` 1 row as settled,
//! so no claim statement changes, and the purge removes skipped rows with
//! the published ones.

use sea_orm::ConnectionTrait;
use txoutbox_core::store::SkipNote;
use txoutbox_core::{MessageId, StoreError};

use super::inspect::{StoredMessage, columns, read_stored};
use super::{SeaOrmOutboxStore, store_err};
use crate::dialect::Sql;

/// Skips the dead message `id`; whether it was dead.
pub(super) async fn skip_dead(
    store: &SeaOrmOutboxStore,
    id: MessageId,
    note: &SkipNote,
) -> Result<bool, StoreError> {
    let dialect = store.dialect;
    let now = dialect.now();
    let mut sql = Sql::new(dialect);
    sql.push(&format!(
        "UPDATE {} SET status = 1, published_at = {now}, skipped_at = {now}, skipped_by = ",
        store.table()
    ));
    sql.bind(note.by.as_str())
        .push(", skip_reason = ")
        .bind(note.reason.clone())
        .push(", lease_token = NULL, lease_expires_at = NULL WHERE status = 2 AND id = ")
        .bind(*id.as_uuid());
    let skipped = store
        .db
        .execute_raw(sql.build())
        .await
        .map_err(store_err("skipping a dead message"))?
        .rows_affected()
        == 1;
    if skipped {
        tracing::info!(message_id = %id, by = %note.by, reason = ?note.reason, "dead outbox message skipped");
    }
    Ok(skipped)
}

/// The `limit` most recently skipped messages, newest first.
pub(super) async fn skipped_messages(
    store: &SeaOrmOutboxStore,
    limit: u32,
) -> Result<Vec<StoredMessage>, StoreError> {
    let mut sql = Sql::new(store.dialect);
    let limit = sql.param(i64::from(limit));
    sql.push(&format!(
        "SELECT {} FROM {} WHERE skipped_at IS NOT NULL ORDER BY skipped_at DESC LIMIT {limit}",
        columns(store.dialect),
        store.table()
    ));
    store
        .read_rows(sql.build(), "listing skipped messages", |row| {
            read_stored(store.dialect, row)
        })
        .await
}
