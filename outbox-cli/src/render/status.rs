//! `outbox status`.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::json;
use txoutbox_sea_orm::admin::Overview;

use crate::error::CliError;

use super::format::{lines, time, time_json};

/// The overview, as text or JSON.
pub(crate) fn overview(overview: &Overview, as_json: bool) -> String {
    let stats = &overview.stats;
    if as_json {
        let by_event: Vec<_> = stats
            .by_event
            .iter()
            .map(|e| json!({ "event": e.event_name, "pending": e.pending, "dead": e.dead }))
            .collect();
        let by_type: Vec<_> = overview
            .by_aggregate_type
            .iter()
            .map(|t| json!({ "aggregate_type": t.aggregate_type, "pending": t.pending, "dead": t.dead }))
            .collect();
        let blocked: Vec<_> = overview
            .blocked
            .iter()
            .map(|b| {
                json!({
                    "aggregate_type": b.aggregate_type, "aggregate_id": b.aggregate_id,
                    "head": b.head.to_string(), "event": b.event_name, "sequence": b.sequence,
                    "state": if b.retry_at.is_some() { "backing-off" } else { "dead" },
                    "retry_at": b.retry_at.map(time_json), "attempts": b.attempts,
                    "last_error": b.last_error, "waiting": b.waiting,
                })
            })
            .collect();
        return lines(json!({
            "pending": stats.pending,
            "pending_is_estimate": stats.pending_is_estimate,
            "leased": stats.leased,
            "dead": stats.dead,
            "skipped": overview.skipped,
            "delayed": stats.delayed,
            "blocked_aggregates": stats.blocked_aggregates,
            "oldest_pending_age_ms": stats.oldest_pending_age.map(|age| age.as_millis() as u64),
            "by_event": by_event,
            "by_aggregate_type": by_type,
            "blocked": blocked,
        }));
    }
    let mut out = String::new();
    let estimate = if stats.pending_is_estimate { "~" } else { "" };
    let age = stats.oldest_pending_age.map_or_else(
        || "-".to_owned(),
        |age| humantime::format_duration(Duration::from_secs(age.as_secs())).to_string(),
    );
    let _ = writeln!(out, "pending  {estimate}{}", stats.pending);
    let _ = writeln!(out, "leased   {}", stats.leased);
    let _ = writeln!(out, "dead     {}", stats.dead);
    let _ = writeln!(out, "skipped  {}", overview.skipped);
    let _ = writeln!(out, "delayed  {}", stats.delayed);
    let _ = writeln!(
        out,
        "blocked  {} (aggregates behind a dead message)",
        stats.blocked_aggregates
    );
    let _ = writeln!(
        out,
        "oldest   {}",
        if stats.oldest_pending_age.is_some() && age == "0s" {
            "<1s".to_owned()
        } else {
            age
        }
    );
    if !stats.by_event.is_empty() {
        let _ = writeln!(out, "\n{:<40} {:>8} {:>6}", "event", "pending", "dead");
        for event in &stats.by_event {
            let _ = writeln!(
                out,
                "{:<40} {:>8} {:>6}",
                event.event_name, event.pending, event.dead
            );
        }
    }
    if !overview.by_aggregate_type.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<40} {:>8} {:>6}",
            "aggregate type", "pending", "dead"
        );
        for t in &overview.by_aggregate_type {
            let _ = writeln!(
                out,
                "{:<40} {:>8} {:>6}",
                t.aggregate_type, t.pending, t.dead
            );
        }
    }
    if overview.blocked.is_empty() {
        let _ = writeln!(out, "\nno blocked aggregates");
    } else {
        let _ = writeln!(out, "\nblocked aggregates ({}):", overview.blocked.len());
        for b in &overview.blocked {
            let why = match b.retry_at {
                None => "dead".to_owned(),
                Some(at) => format!(
                    "backing off until {} after {} failed attempt(s)",
                    time(at),
                    b.attempts
                ),
            };
            let _ = writeln!(
                out,
                "  {}/{}  {} waiting behind #{} {} {}: {why}\n      {}",
                b.aggregate_type,
                b.aggregate_id,
                b.waiting,
                b.sequence,
                b.event_name,
                b.head,
                b.last_error.as_deref().unwrap_or("(no error recorded)")
            );
        }
    }
    out
}

/// The first line of a `--watch` frame.
fn watch_header(every: Duration) -> String {
    format!(
        "outbox status, every {}; {} (Ctrl-C to stop)",
        humantime::format_duration(every),
        time(chrono::Utc::now())
    )
}

/// A `--watch` frame: on a terminal, home, clear the screen, the header,
/// then the overview; elsewhere the overview, each after the previous one
/// (with a blank line between text ones).
pub(crate) fn watch_frame(
    every: Duration,
    overview: &str,
    terminal: bool,
    as_json: bool,
) -> String {
    if terminal {
        format!("\x1b[H\x1b[2J{}\n\n{overview}", watch_header(every))
    } else if as_json {
        overview.to_owned()
    } else {
        format!("{overview}\n")
    }
}

/// A `--watch` frame whose read failed (it is retried at the next).
pub(crate) fn watch_failure(err: &CliError) -> String {
    format!("outbox: {err}\n")
}
