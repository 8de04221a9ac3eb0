//! `outbox aggregate TYPE ID`.

use std::fmt::Write as _;

use serde_json::json;
use txoutbox_sea_orm::admin::{AggregateQueue, MessageState, StoredMessage};

use super::format::{lines, state_json, state_text, summary_json, time};

/// One aggregate's queue and what holds it back.
pub(crate) fn queue(queue: &AggregateQueue, as_json: bool) -> String {
    let blocker = queue.blocker().map(|head| (head, blocked_by(head)));
    if as_json {
        return lines(json!({
            "aggregate_type": queue.aggregate_type,
            "aggregate_id": queue.aggregate_id,
            "unsettled": queue.unsettled,
            "last_settled": queue.last_settled,
            "blocked_by": blocker.map(|(head, why)| json!({
                "id": head.id.to_string(), "sequence": head.sequence, "why": why,
                "state": state_json(&head.state),
            })),
            "messages": queue.messages.iter().map(summary_json).collect::<Vec<_>>(),
        }));
    }
    let mut out = String::new();
    let last = queue
        .last_settled
        .map_or("none in the table".to_owned(), |s| format!("#{s}"));
    let _ = writeln!(
        out,
        "{}/{}: {} unsettled message(s); last settled {last}",
        queue.aggregate_type, queue.aggregate_id, queue.unsettled
    );
    match &blocker {
        Some((head, why)) => {
            let _ = writeln!(out, "blocked by #{} {}: {why}", head.sequence, head.id);
        }
        None if queue.messages.is_empty() => {}
        None => {
            let _ = writeln!(out, "not blocked: the next claim publishes its head");
        }
    }
    for m in &queue.messages {
        let _ = writeln!(
            out,
            "  #{:<6} {}  {:<28} attempts {:<3} {}",
            m.sequence,
            m.id,
            m.event_name,
            m.attempts,
            state_text(&m.state)
        );
        if let (Some(error), false) = (&m.last_error, m.state == MessageState::Pending) {
            let _ = writeln!(out, "          {error}");
        }
    }
    if queue.unsettled > queue.messages.len() as u64 {
        let _ = writeln!(
            out,
            "  … and {} more",
            queue.unsettled - queue.messages.len() as u64
        );
    }
    out
}

/// Why a head holds back what follows it.
fn blocked_by(head: &StoredMessage) -> String {
    match &head.state {
        MessageState::Dead => {
            "it is dead: fix the cause, then `outbox dead requeue ID` (or `outbox dead skip ID`)"
                .to_owned()
        }
        MessageState::NotBefore { until } if head.attempts > 0 => format!(
            "it backs off until {} after {} failed publish(es)",
            time(*until),
            head.attempts
        ),
        MessageState::NotBefore { until } => {
            format!("it is delayed until {}", time(*until))
        }
        MessageState::Leased { token, until } => format!(
            "a processor is publishing it (lease {token}, until {})",
            time(*until)
        ),
        other => other.name().to_owned(),
    }
}
