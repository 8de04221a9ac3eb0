//! The overview: counts, the publish rate, per event and aggregate type,
//! blocked aggregates and what blocks them.

use maud::{Markup, html};
use txoutbox_sea_orm::admin::{BlockedAggregate, Overview};

use super::{age, chart, time};
use crate::audit::Action;
use crate::security::Session;

/// The overview's body.
pub(crate) fn body(
    session: &Session,
    overview: &Overview,
    rate: &Result<Vec<u64>, String>,
    actions: &[Action],
) -> Markup {
    let stats = &overview.stats;
    let estimate = if stats.pending_is_estimate {
        "≥ "
    } else {
        ""
    };
    html! {
        dl.cards aria-label="Backlog" {
            div #pending { dt { "Pending" } dd { (estimate) (stats.pending) } }
            div #leased { dt { "Leased" } dd { (stats.leased) } }
            div #dead class=(if stats.dead > 0 { "bad" } else { "" }) { dt { "Dead" } dd { (stats.dead) } }
            div #skipped { dt { "Skipped" } dd { (overview.skipped) } }
            div #delayed { dt { "Delayed" } dd { (stats.delayed) } }
            div #oldest { dt { "Oldest pending (due)" } dd { (stats.oldest_pending_age.map_or_else(|| "–".to_owned(), age)) } }
            div #blocked-count class=(if overview.blocked.is_empty() { "" } else { "bad" }) { dt { "Blocked aggregates" } dd { (overview.blocked.len()) } }
        }
        h2 { "Publish rate" }
        @match rate {
            Ok(per_minute) => (chart::publish_rate(per_minute)),
            Err(err) => (super::notice("bad", &format!("The publish rate could not be read: {err}"))),
        }
        h2 #blocked { "Blocked aggregates" }
        @if overview.blocked.is_empty() {
            p { "No aggregate is held behind a dead or backing-off message." }
        } @else {
            (blocked_table(session, &overview.blocked))
        }
        h2 { "Per event type" }
        (counts_table("by-event", "Event", stats.by_event.iter().map(|e| (e.event_name.as_str(), e.pending, e.dead))))
        h2 { "Per aggregate type" }
        (counts_table("by-aggregate", "Aggregate type", overview.by_aggregate_type.iter().map(|a| (a.aggregate_type.as_str(), a.pending, a.dead))))
        @if stats.pending_is_estimate {
            p.muted { "More messages are pending than the console counts exactly: pending is an estimate, and the per-type pending counts cover the oldest pending messages only." }
        }
        h2 { "Recent actions" }
        (super::status::actions_table(actions.iter().take(5)))
        p { a href=(session.href("/actions")) { "All recent actions" } }
    }
}

/// Pending and dead counts of `rows` (name, pending, dead).
fn counts_table<'a>(
    id: &str,
    heading: &str,
    rows: impl Iterator<Item = (&'a str, u64, u64)>,
) -> Markup {
    let rows: Vec<_> = rows.collect();
    html! {
        @if rows.is_empty() {
            p { "Nothing pending or dead." }
        } @else {
            table id=(id) {
                thead { tr { th scope="col" { (heading) } th.n scope="col" { "Pending" } th.n scope="col" { "Dead" } } }
                tbody {
                    @for (name, pending, dead) in rows {
                        tr { td { code { (name) } } td.n { (pending) } td.n { (dead) } }
                    }
                }
            }
        }
    }
}

/// Blocked aggregates, what blocks each, and how much waits.
fn blocked_table(session: &Session, blocked: &[BlockedAggregate]) -> Markup {
    html! {
        table #blocked-aggregates {
            thead { tr {
                th scope="col" { "Aggregate" } th scope="col" { "Blocked by" } th scope="col" { "Why" }
                th.n scope="col" { "Attempts" } th.n scope="col" { "Waiting behind" }
            } }
            tbody {
                @for b in blocked {
                    tr {
                        td { code { (b.aggregate_type) "/" (b.aggregate_id) } }
                        td {
                            a href=(session.href(&format!("/dead/{}", b.head))) { code { (b.event_name) } " #" (b.sequence) }
                            " "
                            @match &b.retry_at {
                                None => span.state-dead { "dead" },
                                Some(at) => span { "backing off until " (time(at)) },
                            }
                        }
                        td { (b.last_error.as_deref().unwrap_or("–")) }
                        td.n { (b.attempts) }
                        td.n { (b.waiting) }
                    }
                }
            }
        }
    }
}
