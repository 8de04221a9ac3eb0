//! `outbox dead list`, `dead list --skipped` and `dead show`.

use std::fmt::Write as _;

use serde_json::{Value, json};
use txoutbox_core::store::SkipNote;
use txoutbox_sea_orm::admin::{AggregateQueue, DeadMessage, StoredMessage};

use super::format::{lines, state_text, summary_json, time, time_json};

/// Dead messages.
pub(crate) fn list(messages: &[DeadMessage], as_json: bool) -> String {
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

/// Skipped messages.
pub(crate) fn skipped(messages: &[StoredMessage], as_json: bool) -> String {
    if as_json {
        let rows: Vec<_> = messages.iter().map(summary_json).collect();
        return lines(json!(rows));
    }
    if messages.is_empty() {
        return "no skipped messages\n".to_owned();
    }
    let mut out = String::new();
    for m in messages {
        let _ = writeln!(
            out,
            "{}  {}  {}/{} #{}  {}\n    last error: {}",
            m.id,
            m.event_name,
            m.aggregate_type,
            m.aggregate_id,
            m.sequence,
            state_text(&m.state),
            m.last_error.as_deref().unwrap_or("(none recorded)")
        );
    }
    out
}

/// One message in full, and what waits behind it.
pub(crate) fn show(message: &StoredMessage, behind: &AggregateQueue, as_json: bool) -> String {
    let headers: Option<Value> = message
        .headers
        .as_deref()
        .map(|text| serde_json::from_str(text).unwrap_or_else(|_| json!(text)));
    let payload: Result<Value, _> = serde_json::from_str(&message.payload);
    if as_json {
        let mut value = summary_json(message);
        value["subject"] = json!(message.subject);
        value["event_version"] = json!(message.event_version);
        value["occurred_at"] = time_json(message.occurred_at);
        value["correlation_id"] = json!(message.correlation_id);
        value["causation_id"] = json!(message.causation_id);
        value["tenant"] = json!(message.tenant);
        value["traceparent"] = json!(message.traceparent);
        value["abandoned"] = json!(message.abandoned);
        value["headers"] = headers.unwrap_or(Value::Null);
        value["payload"] = payload.unwrap_or_else(|_| json!(message.payload));
        value["waiting_behind"] = json!(behind.unsettled);
        value["behind"] = json!(behind.messages.iter().map(summary_json).collect::<Vec<_>>());
        return lines(value);
    }
    let mut out = String::new();
    let m = message;
    let mut field = |name: &str, value: &str| {
        let _ = writeln!(out, "{name:<13}{value}");
    };
    field("id", &m.id.to_string());
    field("event", &format!("{} v{}", m.event_name, m.event_version));
    field(
        "aggregate",
        &format!("{}/{} #{}", m.aggregate_type, m.aggregate_id, m.sequence),
    );
    field("subject", &m.subject);
    field("created", &time(m.created_at));
    field("occurred", &time(m.occurred_at));
    field("state", &state_text(&m.state));
    field("attempts", &m.attempts.to_string());
    field("correlation", &m.correlation_id);
    if let Some(causation) = &m.causation_id {
        field("causation", causation);
    }
    if let Some(tenant) = &m.tenant {
        field("tenant", tenant);
    }
    if let Some(traceparent) = &m.traceparent {
        field("traceparent", traceparent);
    }
    field(
        "last error",
        m.last_error.as_deref().unwrap_or("(none recorded)"),
    );
    let _ = writeln!(out, "\nheaders");
    match &headers {
        Some(Value::Object(map)) if !map.is_empty() => {
            for (name, value) in map {
                let value = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                let _ = writeln!(out, "  {name}: {value}");
            }
        }
        Some(Value::String(raw)) => {
            let _ = writeln!(out, "  {raw}");
        }
        _ => {
            let _ = writeln!(out, "  (none)");
        }
    }
    let _ = writeln!(out, "\npayload");
    let pretty = payload
        .ok()
        .and_then(|value| serde_json::to_string_pretty(&value).ok())
        .unwrap_or_else(|| m.payload.clone());
    for line in pretty.lines() {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(out, "\nwaiting behind it: {}", behind.unsettled);
    for w in &behind.messages {
        let _ = writeln!(
            out,
            "  #{} {} {} ({})",
            w.sequence,
            w.id,
            w.event_name,
            state_text(&w.state)
        );
    }
    if behind.unsettled > behind.messages.len() as u64 {
        let _ = writeln!(
            out,
            "  … and {} more (outbox aggregate {} {})",
            behind.unsettled - behind.messages.len() as u64,
            m.aggregate_type,
            m.aggregate_id
        );
    }
    out
}

/// `dead requeue` when there is nothing to requeue.
pub(crate) fn nothing_to_requeue() -> String {
    "no dead messages to requeue\n".to_owned()
}

/// `dead requeue` done.
pub(crate) fn requeued(count: u64) -> String {
    format!("requeued {count} dead message(s): they are pending again, attempts reset\n")
}

/// `dead skip` done: `message` skipped with `note`; `waiting` messages
/// behind it go on.
pub(crate) fn skipped_one(message: &StoredMessage, note: &SkipNote, waiting: u64) -> String {
    let aggregate = format!("{}/{}", message.aggregate_type, message.aggregate_id);
    format!(
        "skipped {} ({} #{} of {aggregate}) as {}{}: {aggregate} goes on, {waiting} message(s) \
         behind it will be published\n",
        message.id,
        message.event_name,
        message.sequence,
        note.by,
        note.reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default(),
    )
}
