//! [`TableRecords`]: what a verification reads from the outbox table (its
//! published rows and its stale pending ones), whatever store holds it.

use std::future::Future;
use std::time::Duration;

use super::records::{PublishedRecord, StalePending};
use crate::store::StoreError;

/// The outbox table's side of a verification: the rows it compares with the
/// stream. Implemented by `txoutbox-sea-orm`'s store (and its `Outbox`);
/// `txoutbox-nats`'s `verify_stream` reads the stream's side and compares
/// both with [`reconcile`](super::reconcile).
///
/// ```
/// # async fn run(table: impl txoutbox_core::verify::TableRecords) -> Result<(), txoutbox_core::StoreError> {
/// use std::time::Duration;
/// let rows = table.published_records(Some(Duration::from_secs(3600))).await?;
/// let stale = table.stale_pending(Duration::from_secs(300), 100).await?;
/// # let _ = (rows, stale); Ok(()) }
/// ```
pub trait TableRecords: Send + Sync {
    /// The rows marked published, with their recorded stream sequence: all
    /// of them, or those published within `within` (by the database clock),
    /// in publishing order. Skipped messages (settled unpublished by an
    /// operator) are not among them.
    fn published_records(
        &self,
        within: Option<Duration>,
    ) -> impl Future<Output = Result<Vec<PublishedRecord>, StoreError>> + Send;

    /// The oldest `limit` pending rows written more than `older_than` ago
    /// (by the database clock), oldest first.
    fn stale_pending(
        &self,
        older_than: Duration,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<StalePending>, StoreError>> + Send;
}
