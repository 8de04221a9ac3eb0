//! The inbox's upkeep: deletes the rows of messages applied long ago, in
//! bounded batches, while the subscriber runs.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use txoutbox_core::ErrorChain;

use super::shared::Shared;

/// Purges the inbox every [`Cleanup::every`](txoutbox_core::cleanup::Cleanup::every)
/// until `stop` is cancelled; does nothing without an inbox or with
/// cleanup off. A failed pass is logged and tried again at the next one.
pub(crate) async fn run(shared: Arc<Shared>, stop: CancellationToken) {
    let Some((inbox, cleanup)) = shared.cleanup.clone() else {
        return;
    };
    let mut first = true;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(cleanup.pause(first)) => {}
        }
        first = false;
        let purging = inbox.purge_applied(cleanup.older_than(), cleanup.rows_per_statement());
        let purged = tokio::select! {
            () = stop.cancelled() => return,
            purged = purging => purged,
        };
        match purged {
            Ok(0) => {}
            Ok(rows) => {
                tracing::debug!(consumer = %shared.consumer, rows, "inbox: old rows deleted");
                ::metrics::counter!(
                    super::metrics::INBOX_PURGED,
                    "consumer" => Arc::clone(&shared.consumer),
                )
                .increment(rows);
            }
            Err(err) => tracing::warn!(
                consumer = %shared.consumer,
                error = %ErrorChain(&*err),
                "inbox cleanup failed; trying again at the next pass"
            ),
        }
    }
}
