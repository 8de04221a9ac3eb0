//! `outbox holds` and `outbox release` (one, or `--all`).

use std::fmt::Write as _;

use serde_json::json;
use txoutbox_core::consumer::{Hold, Release};
use txoutbox_sea_orm::inbox::HoldFilter;

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
                    "held_since": h.held_since.map(|at| at.to_rfc3339()),
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
        let since = h.held_since.map_or(String::new(), |at| {
            format!("  since {}", at.format("%Y-%m-%d %H:%M:%S UTC"))
        });
        let _ = writeln!(
            out,
            "{}/{}  held behind {} ({})  {} waiting{since}{release}\n    {}",
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

/// `release --all` found nothing to release.
pub(crate) fn none_to_release(consumer: &str, filter: &HoldFilter) -> String {
    format!("no held aggregate of consumer {consumer} left to release ({filter})\n")
}

/// What `release --all` is about to release: how many, and the first few.
pub(crate) fn preview(consumer: &str, filter: &HoldFilter, total: u64, first: &[Hold]) -> String {
    let mut out = format!(
        "{total} held aggregate(s) of consumer {consumer} to release ({filter}), oldest first:\n"
    );
    for h in first {
        let since = h.held_since.map_or(String::new(), |at| {
            format!(" since {}", at.format("%Y-%m-%d %H:%M:%S UTC"))
        });
        let _ = writeln!(
            out,
            "  {}/{}  held{since} behind {}, {} waiting: {}",
            h.aggregate_type, h.aggregate_id, h.event_name, h.waiting, h.reason
        );
    }
    let more = total.saturating_sub(first.len() as u64);
    if more > 0 {
        let _ = writeln!(out, "  … and {more} more");
    }
    out
}

/// What a release does to the message an aggregate is held behind.
pub(crate) fn what_release_does(how: Release) -> &'static str {
    match how {
        Release::Retry => "apply the message each is held behind again",
        Release::Skip => "leave the message each is held behind unapplied for good",
    }
}

/// `release --all` done.
pub(crate) fn released_all(consumer: &str, released: u64, how: Release) -> String {
    format!(
        "released {released} held aggregate(s) of consumer {consumer} ({}), oldest first: its \
         subscriber applies what is parked, in order, within a second or so\n",
        how.as_str()
    )
}
