//! The inbox's upkeep: deletes the rows of messages applied long ago, in
//! bounded batches, while the subscriber runs.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::subscriber::setup::Shared;

/// Purges the inbox every [`Cleanup::every`](txoutbox_core::cleanup::Cleanup::every)
/// until `stop` is cancelled; does nothing without an inbox or with
/// cleanup off. A failed pass is logged and tried again at the next one.
pub(crate) async fn run(shared: Arc<Shared>, stop: CancellationToken) {
    let Some((inbox, cleanup)) = shared.cleanup.clone() else {
        return;
    };
    let purged = |rows| {
        ::metrics::counter!(
            super::metrics::INBOX_PURGED,
            "consumer" => Arc::clone(&shared.consumer),
        )
        .increment(rows);
    };
    cleanup
        .run(
            &format!("inbox of {}", shared.consumer),
            stop,
            |age, rows| inbox.purge_applied(age, rows),
            purged,
        )
        .await;
}
