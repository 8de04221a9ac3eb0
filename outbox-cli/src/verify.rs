//! `outbox verify`: the outbox table against the stream. Reads the
//! published rows and the stale pending ones (`outbox-sea-orm`), the
//! stream's messages from the same time on (`outbox-nats`, headers only),
//! and compares them (`txoutbox_core::verify`).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use txoutbox_core::verify::{Discrepancy, Reconciliation, StreamedMessage, reconcile};
use txoutbox_nats::stream_read::{self, ReadError};
use txoutbox_sea_orm::SeaOrmOutboxStore;

use crate::broker::BrokerError;
use crate::nats::NatsArgs;

/// The stream is read from this long before `--since`: a row's
/// `published_at` (database clock, after the ack) is later than its
/// message's time in the stream (server clock).
const CLOCK_MARGIN: Duration = Duration::from_secs(60);

/// Stale pending rows listed at most.
const STALE_LIMIT: u32 = 100;

/// `outbox verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The stream the outbox publishes to.
    #[arg(long)]
    stream: String,
    /// Only rows published within this long (e.g. `1h`, `30m`); default:
    /// every published row (and, if the stream has an age limit, those
    /// younger than it).
    #[arg(long, value_parser = humantime::parse_duration)]
    since: Option<Duration>,
    /// A row pending longer than this is a discrepancy.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5m")]
    pending_older_than: Duration,
    #[command(flatten)]
    nats: NatsArgs,
}

/// Runs `outbox verify`: the report, or [`BrokerError::Discrepancies`].
pub(crate) async fn run(
    args: VerifyArgs,
    store: &SeaOrmOutboxStore,
    json: bool,
) -> Result<String, BrokerError> {
    let jetstream = args.nats.jetstream().await?;
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
    let rows = store.published_records(within).await?;
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
        .await?;
    let report = reconcile(&rows, &messages, stale);
    let output = if json {
        render_json(&args, within, &report)
    } else {
        render_text(&args, within, &report)
    };
    if report.is_clean() {
        Ok(output)
    } else {
        Err(BrokerError::Discrepancies {
            output,
            count: report.discrepancies.len(),
        })
    }
}

fn scope(within: Option<Duration>) -> String {
    within.map_or_else(
        || "every published row".to_owned(),
        |d| {
            format!(
                "rows published within {}",
                humantime::format_duration(whole(d))
            )
        },
    )
}

fn whole(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

fn render_text(args: &VerifyArgs, within: Option<Duration>, report: &Reconciliation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "verify {} against stream {}",
        scope(within),
        args.stream
    );
    let _ = writeln!(out, "rows checked        {}", report.rows_checked);
    let _ = writeln!(out, "messages read       {}", report.messages_checked);
    let _ = writeln!(out, "aggregates checked  {}", report.aggregates_checked);
    let _ = writeln!(out, "messages w/o row    {}", report.messages_without_row);
    let _ = writeln!(
        out,
        "pending older than  {}",
        humantime::format_duration(args.pending_older_than)
    );
    if report.is_clean() {
        let _ = writeln!(out, "OK: no discrepancy");
        return out;
    }
    let _ = writeln!(out, "{} discrepancies:", report.discrepancies.len());
    for discrepancy in &report.discrepancies {
        let _ = writeln!(out, "  {discrepancy}");
    }
    out
}

fn render_json(args: &VerifyArgs, within: Option<Duration>, report: &Reconciliation) -> String {
    let discrepancies: Vec<_> = report.discrepancies.iter().map(discrepancy_json).collect();
    format!(
        "{}\n",
        json!({
            "stream": args.stream,
            "within_seconds": within.map(|d| d.as_secs()),
            "pending_older_than_seconds": args.pending_older_than.as_secs(),
            "ok": report.is_clean(),
            "rows_checked": report.rows_checked,
            "messages_checked": report.messages_checked,
            "aggregates_checked": report.aggregates_checked,
            "messages_without_row": report.messages_without_row,
            "discrepancies": discrepancies,
        })
    )
}

fn discrepancy_json(discrepancy: &Discrepancy) -> serde_json::Value {
    let details = match discrepancy {
        Discrepancy::Missing {
            id,
            aggregate_type,
            aggregate_id,
            sequence,
            recorded_stream_sequence,
        } => json!({
            "id": id.to_string(), "aggregate_type": aggregate_type,
            "aggregate_id": aggregate_id, "sequence": sequence,
            "recorded_stream_sequence": recorded_stream_sequence,
        }),
        Discrepancy::Duplicate {
            message_id,
            stream_sequences,
        } => json!({ "id": message_id, "stream_sequences": stream_sequences }),
        Discrepancy::OutOfOrder {
            aggregate_type,
            aggregate_id,
            first_sequence,
            first_stream_sequence,
            then_sequence,
            then_stream_sequence,
        } => json!({
            "aggregate_type": aggregate_type, "aggregate_id": aggregate_id,
            "first_sequence": first_sequence, "first_stream_sequence": first_stream_sequence,
            "then_sequence": then_sequence, "then_stream_sequence": then_stream_sequence,
        }),
        Discrepancy::StalePending(row) => json!({
            "id": row.id.to_string(), "event": row.event_name,
            "aggregate_type": row.aggregate_type, "aggregate_id": row.aggregate_id,
            "sequence": row.sequence, "attempts": row.attempts,
            "age_seconds": row.age.as_secs(),
        }),
        // A kind newer than this tool: its kind and text only.
        _ => json!({}),
    };
    let mut value = json!({ "kind": discrepancy.kind(), "text": discrepancy.to_string() });
    if let (Some(target), serde_json::Value::Object(fields)) = (value.as_object_mut(), details) {
        target.extend(fields);
    }
    value
}
