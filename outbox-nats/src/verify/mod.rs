//! Verifying the outbox table against its stream: the run behind `outbox
//! verify` and the web console's verify page. Reads the published rows and
//! the stale pending ones through the core's
//! [`TableRecords`] (`txoutbox-sea-orm`'s store and `Outbox` implement it),
//! the stream's messages from the same time on ([`stream_read`](crate::stream_read),
//! headers only), and compares them ([`txoutbox_core::verify::reconcile`]).
//!
//! ```no_run
//! # async fn run(table: impl txoutbox_core::verify::TableRecords, jetstream: txoutbox_nats::async_nats::jetstream::Context) -> Result<(), txoutbox_nats::VerifyError> {
//! use std::time::Duration;
//! use txoutbox_nats::{VerifyRequest, verify_stream};
//!
//! // `table`: a `txoutbox_sea_orm::Outbox`, or its store.
//! let request = VerifyRequest::new("ORDERS").since(Duration::from_secs(3600));
//! let outcome = verify_stream(&table, &jetstream, &request).await?;
//! if !outcome.report.is_clean() {
//!     eprintln!("{} discrepancies", outcome.report.discrepancies.len());
//! }
//! # Ok(()) }
//! ```

mod error;
mod request;

pub use error::VerifyError;
pub use request::{VerifyOutcome, VerifyRequest};

use std::collections::HashSet;
use std::time::Duration;

use async_nats::jetstream;
use txoutbox_core::verify::{StreamedMessage, TableRecords, reconcile};

use crate::stream_read::{self, ReadError};

/// The stream is read from this long before `since`: a row's
/// `published_at` (database clock, after the ack) is later than its
/// message's time in the stream (server clock).
const CLOCK_MARGIN: Duration = Duration::from_secs(60);

/// Stale pending rows listed at most.
const STALE_LIMIT: u32 = 100;

/// Verifies `table` against the stream `request` names: every published
/// row has its message in the stream, none twice, in aggregate order, and
/// no pending row is stale.
pub async fn verify_stream(
    table: &impl TableRecords,
    jetstream: &jetstream::Context,
    request: &VerifyRequest,
) -> Result<VerifyOutcome, VerifyError> {
    let mut stream = stream_read::open_stream(jetstream, &request.stream).await?;
    let max_age = stream
        .info()
        .await
        .map_err(|e| ReadError::Request {
            stream: request.stream.clone(),
            source: Box::new(e),
        })?
        .config
        .max_age;
    // Rows older than the stream keeps messages may have expired there.
    let within = match (request.since, max_age.is_zero()) {
        (since, true) => since,
        (Some(since), false) => Some(since.min(max_age.saturating_sub(CLOCK_MARGIN))),
        (None, false) => Some(max_age.saturating_sub(CLOCK_MARGIN)),
    };
    let rows = table.published_records(within).await?;
    let from = within.and_then(|within| {
        chrono::Duration::from_std(within + CLOCK_MARGIN)
            .ok()
            .map(|ago| chrono::Utc::now() - ago)
    });
    let mut messages = stream_read::stored_messages(jetstream, &request.stream, from).await?;
    // A row whose message is older than what was read (clocks apart): look
    // it up where the broker said it stored it.
    let read: HashSet<String> = messages
        .iter()
        .filter_map(|m| m.message_id.clone())
        .collect();
    for row in &rows {
        let id = row.id.to_string();
        let Some(sequence) = row.stream_sequence.filter(|_| !read.contains(&id)) else {
            continue;
        };
        match stream_read::message_at(jetstream, &request.stream, sequence).await {
            Ok(message) => {
                let found: StreamedMessage = stream_read::stored(sequence, Some(&message.headers));
                if found.message_id.as_deref() == Some(id.as_str())
                    && messages.iter().all(|m| m.stream_sequence != sequence)
                {
                    messages.push(found);
                }
            }
            Err(ReadError::NoMessage { .. }) => {}
            Err(err) => return Err(err.into()),
        }
    }
    let stale = table
        .stale_pending(request.pending_older_than, STALE_LIMIT)
        .await?;
    Ok(VerifyOutcome {
        within,
        report: reconcile(&rows, &messages, stale),
    })
}
