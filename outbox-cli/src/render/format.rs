//! The pieces the views share: times, states, messages' identity, JSON
//! lines.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use txoutbox_sea_orm::admin::{MessageState, StoredMessage};

/// A time as operators read it: UTC, to the second.
pub(super) fn time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A time as JSON: RFC 3339.
pub(super) fn time_json(at: DateTime<Utc>) -> Value {
    json!(at.to_rfc3339())
}

/// A state in a few words.
pub(super) fn state_text(state: &MessageState) -> String {
    match state {
        MessageState::Pending => "pending".to_owned(),
        MessageState::NotBefore { until } => format!("pending, not before {}", time(*until)),
        MessageState::Leased { token, until } => {
            format!("leased by lease {token} until {}", time(*until))
        }
        MessageState::Dead => "dead".to_owned(),
        MessageState::Published {
            at,
            stream_sequence,
        } => match stream_sequence {
            Some(seq) => format!("published {} (stream sequence {seq})", time(*at)),
            None => format!("published {}", time(*at)),
        },
        MessageState::Skipped { at, by, reason } => format!(
            "skipped {} by {}{}",
            time(*at),
            by.as_deref().unwrap_or("?"),
            reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        _ => state.name().to_owned(),
    }
}

/// A state as JSON: `{"state": name, ...details}`.
pub(super) fn state_json(state: &MessageState) -> Value {
    match state {
        MessageState::NotBefore { until } => {
            json!({ "state": state.name(), "until": time_json(*until) })
        }
        MessageState::Leased { token, until } => json!({
            "state": state.name(), "lease_token": token.to_string(), "until": time_json(*until)
        }),
        MessageState::Published {
            at,
            stream_sequence,
        } => json!({
            "state": state.name(), "at": time_json(*at), "stream_sequence": stream_sequence
        }),
        MessageState::Skipped { at, by, reason } => json!({
            "state": state.name(), "at": time_json(*at), "by": by, "reason": reason
        }),
        _ => json!({ "state": state.name() }),
    }
}

/// A JSON value on one line.
pub(super) fn lines(value: Value) -> String {
    format!("{value}\n")
}

/// A message's identity and state as JSON.
pub(super) fn summary_json(m: &StoredMessage) -> Value {
    json!({
        "id": m.id.to_string(), "event": m.event_name,
        "aggregate_type": m.aggregate_type, "aggregate_id": m.aggregate_id,
        "sequence": m.sequence, "created_at": time_json(m.created_at),
        "attempts": m.attempts, "last_error": m.last_error,
        "state": state_json(&m.state),
    })
}
