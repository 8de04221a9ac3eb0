//! Text and JSON for what the commands read.

use std::fmt::Write as _;

use outbox_core::{Hold, OutboxStats};
use outbox_sea_orm::DeadMessage;
use serde_json::json;

/// The outbox's counts.
pub(crate) fn stats(stats: &OutboxStats, as_json: bool) -> String {
    if as_json {
        let by_event: Vec<_> = stats
            .by_event
            .iter()
            .map(|e| json!({ "event": e.event_name, "pending": e.pending, "dead": e.dead }))
            .collect();
        return lines(json!({
            "pending": stats.pending,
            "pending_is_estimate": stats.pending_is_estimate,
            "leased": stats.leased,
            "dead": stats.dead,
            "oldest_pending_age_ms": stats.oldest_pending_age.map(|age| age.as_millis() as u64),
            "by_event": by_event,
        }));
    }
    let mut out = String::new();
    let estimate = if stats.pending_is_estimate { "~" } else { "" };
    let _ = writeln!(out, "pending  {estimate}{}", stats.pending);
    let _ = writeln!(out, "leased   {}", stats.leased);
    let _ = writeln!(out, "dead     {}", stats.dead);
    let age = stats.oldest_pending_age.map_or_else(
        || "-".to_owned(),
        |age| format!("{:.1} s", age.as_secs_f64()),
    );
    let _ = writeln!(out, "oldest   {age}");
    for event in &stats.by_event {
        let _ = writeln!(
            out,
            "  {:<40} pending {:>8}  dead {:>6}",
            event.event_name, event.pending, event.dead
        );
    }
    out
}

/// Dead messages.
pub(crate) fn dead(messages: &[DeadMessage], as_json: bool) -> String {
    if as_json {
        let rows: Vec<_> = messages
            .iter()
            .map(|m| {
                json!({
                    "id": m.id.to_string(), "event": m.event_name,
                    "aggregate_type": m.aggregate_type, "aggregate_id": m.aggregate_id,
                    "sequence": m.sequence, "attempts": m.attempts,
                    "last_error": m.last_error, "waiting_behind": m.waiting_behind,
                })
            })
            .collect();
        return lines(json!(rows));
    }
    if messages.is_empty() {
        return "no dead messages\n".to_owned();
    }
    let mut out = String::new();
    for m in messages {
        let _ = writeln!(
            out,
            "{}  {}  {}/{} #{}  attempts {}  {} waiting behind\n    {}",
            m.id,
            m.event_name,
            m.aggregate_type,
            m.aggregate_id,
            m.sequence,
            m.attempts,
            m.waiting_behind,
            m.last_error.as_deref().unwrap_or("(no reason recorded)")
        );
    }
    out
}

/// A consumer's held aggregates.
pub(crate) fn holds(holds: &[Hold], as_json: bool) -> String {
    if as_json {
        let rows: Vec<_> = holds
            .iter()
            .map(|h| {
                json!({
                    "aggregate_type": h.aggregate_type, "aggregate_id": h.aggregate_id,
                    "message_id": h.message_id.to_string(), "event": h.event_name,
                    "reason": h.reason, "waiting": h.waiting,
                    "release": h.release.map(|r| r.as_str()),
                })
            })
            .collect();
        return lines(json!(rows));
    }
    if holds.is_empty() {
        return "no held aggregates\n".to_owned();
    }
    let mut out = String::new();
    for h in holds {
        let release = h
            .release
            .map_or(String::new(), |r| format!("  (release: {})", r.as_str()));
        let _ = writeln!(
            out,
            "{}/{}  held behind {} ({})  {} waiting{release}\n    {}",
            h.aggregate_type, h.aggregate_id, h.event_name, h.message_id, h.waiting, h.reason
        );
    }
    out
}

fn lines(value: serde_json::Value) -> String {
    format!("{value}\n")
}
