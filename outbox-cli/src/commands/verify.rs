//! `outbox verify`: the outbox table against the stream. Reads the
//! published rows and the stale pending ones (`outbox-sea-orm`), the
//! stream's messages from the same time on (`outbox-nats`, headers only),
//! and compares them (`txoutbox_core::verify`).

use std::collections::HashSet;
use std::time::Duration;

use txoutbox_core::verify::{StreamedMessage, reconcile};
use txoutbox_nats::stream_read::{self, ReadError};

use crate::context::Context;
use crate::error::CliError;
use crate::opt::VerifyArgs;
use crate::render;

/// The stream is read from this long before `--since`: a row's
/// `published_at` (database clock, after the ack) is later than its
/// message's time in the stream (server clock).
const CLOCK_MARGIN: Duration = Duration::from_secs(60);

/// Stale pending rows listed at most.
const STALE_LIMIT: u32 = 100;

/// Runs `outbox verify`: prints the report, or fails with
/// [`CliError::Discrepancies`] (which carries it).
pub(super) async fn run(context: &Context, args: VerifyArgs) -> Result<(), CliError> {
    let outbox = context.outbox().await?;
    let store = outbox.store();
    let jetstream = context.jetstream(&args.nats).await?;
    let mut stream = stream_read::open_stream(&jetstream, &args.stream).await?;
    let max_age = stream
        .info()
        .await
        .map_err(|e| ReadError::Request {
            stream: args.stream.clone(),
            source: Box::new(e),
        })?
        .config
        .max_age;
    // Rows older than the stream keeps messages may have expired there.
    let within = match (args.since, max_age.is_zero()) {
        (since, true) => since,
        (Some(since), false) => Some(since.min(max_age.saturating_sub(CLOCK_MARGIN))),
        (None, false) => Some(max_age.saturating_sub(CLOCK_MARGIN)),
    };
    let rows = store
        .published_records(within)
        .await
        .map_err(CliError::VerifyStore)?;
    let from = within.and_then(|within| {
        chrono::Duration::from_std(within + CLOCK_MARGIN)
            .ok()
            .map(|ago| chrono::Utc::now() - ago)
    });
    let mut messages = stream_read::stored_messages(&jetstream, &args.stream, from).await?;
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
        match stream_read::message_at(&jetstream, &args.stream, sequence).await {
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
        .stale_pending(args.pending_older_than, STALE_LIMIT)
        .await
        .map_err(CliError::VerifyStore)?;
    let report = reconcile(&rows, &messages, stale);
    let output = render::verify::report(&args, within, &report, context.json());
    if report.is_clean() {
        print!("{output}");
        Ok(())
    } else {
        Err(CliError::Discrepancies {
            output,
            count: report.discrepancies.len(),
        })
    }
}
