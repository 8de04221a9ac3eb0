//! `outbox verify`: its report.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::json;
use txoutbox_core::verify::{Discrepancy, Reconciliation};

use crate::opt::VerifyArgs;

/// The report on `report` (rows published `within`, if bounded), as text
/// or JSON.
pub(crate) fn report(
    args: &VerifyArgs,
    within: Option<Duration>,
    report: &Reconciliation,
    as_json: bool,
) -> String {
    if as_json {
        json_report(args, within, report)
    } else {
        text_report(args, within, report)
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

fn text_report(args: &VerifyArgs, within: Option<Duration>, report: &Reconciliation) -> String {
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

fn json_report(args: &VerifyArgs, within: Option<Duration>, report: &Reconciliation) -> String {
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
