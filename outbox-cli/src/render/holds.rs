//! `outbox holds` and `outbox release`.

use std::fmt::Write as _;

use serde_json::json;
use txoutbox_core::consumer::{Hold, Release};

use super::format::lines;

/// A consumer's held aggregates.
pub(crate) fn list(holds: &[Hold], as_json: bool) -> String {
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

/// `release` done.
pub(crate) fn released(aggregate_type: &str, aggregate_id: &str, how: Release) -> String {
    format!(
        "released {aggregate_type}/{aggregate_id} ({}): its subscriber applies what is parked \
         within a second\n",
        how.as_str()
    )
}
