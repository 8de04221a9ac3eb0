//! Verifying the outbox table against its stream: the run behind `outbox
//! verify` and the console's verify page. Reads the published rows and the
//! stale pending ones (`txoutbox-sea-orm`), the stream's messages from the
//! same time on (`txoutbox-nats`, headers only), and compares them
//! ([`txoutbox_core::verify::reconcile`]).
//!
//! ```no_run
//! # async fn run(outbox: txoutbox_sea_orm::Outbox, jetstream: txoutbox_nats::async_nats::jetstream::Context) -> Result<(), txoutbox_console::ConsoleError> {
//! use std::time::Duration;
//! use txoutbox_console::verification::{VerifyRequest, verify_stream};
//!
//! let request = VerifyRequest::new("ORDERS").since(Duration::from_secs(3600));
//! let outcome = verify_stream(&outbox, &jetstream, &request).await?;
//! if !outcome.report.is_clean() {
//!     eprintln!("{} discrepancies", outcome.report.discrepancies.len());
//! }
//! # Ok(()) }
//! ```

use std::collections::HashSet;
use std::time::Duration;

use txoutbox_core::verify::{Reconciliation, StreamedMessage, reconcile};
use txoutbox_nats::async_nats::jetstream;
use txoutbox_nats::stream_read::{self, ReadError};
use txoutbox_sea_orm::Outbox;

use crate::error::ConsoleError;

/// The stream is read from this long before `since`: a row's
/// `published_at` (database clock, after the ack) is later than its
/// message's time in the stream (server clock).
const CLOCK_MARGIN: Duration = Duration::from_secs(60);

/// Stale pending rows listed at most.
const STALE_LIMIT: u32 = 100;

/// What to verify: the stream, how far back, and from what age a pending
/// row counts as stale.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyRequest {
    /// The stream the outbox publishes to.
    pub stream: String,
    /// Rows published within this long (all, if `None`; never older than
    /// the stream keeps messages).
    pub since: Option<Duration>,
    /// Pending rows older than this are discrepancies.
    pub pending_older_than: Duration,
}

impl VerifyRequest {
    /// Every row the stream can still hold, pending rows stale after 5
    /// minutes.
    pub fn new(stream: impl Into<String>) -> Self {
        Self {
            stream: stream.into(),
            since: None,
            pending_older_than: Duration::from_secs(300),
        }
    }

    /// Only rows published within `since`.
    #[must_use]
    pub fn since(mut self, since: Duration) -> Self {
        self.since = Some(since);
        self
    }

    /// Pending rows older than `age` are discrepancies.
    #[must_use]
    pub fn pending_older_than(mut self, age: Duration) -> Self {
        self.pending_older_than = age;
        self
    }
}

/// What a verify run checked and found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyOutcome {
    /// How far back rows were checked: the request's `since`, cut to what
    /// the stream keeps (its `max_age` less a minute); `None`: every row.
    pub within: Option<Duration>,
    /// The comparison.
    pub report: Reconciliation,
}

/// Verifies `outbox`'s table against the stream `request` names: every
/// published row has its message in the stream, none twice, in aggregate
/// order, and no pending row is stale.
pub async fn verify_stream(
    outbox: &Outbox,
    jetstream: &jetstream::Context,
    request: &VerifyRequest,
) -> Result<VerifyOutcome, ConsoleError> {
    let store = outbox.store();
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
    let rows = store.published_records(within).await?;
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
    let stale = store
        .stale_pending(request.pending_older_than, STALE_LIMIT)
        .await?;
    Ok(VerifyOutcome {
        within,
        report: reconcile(&rows, &messages, stale),
    })
}
