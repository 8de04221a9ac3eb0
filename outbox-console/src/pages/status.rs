//! The pages about the console and the parts around it: recent actions,
//! the last verify run, the processor's and subscribers' health.

use maud::{Markup, html};
use txoutbox_core::verify::Discrepancy;
use txoutbox_nats::OutboxHealth;

use super::{age, csrf_field, time};
use crate::audit::Action;
use crate::security::Session;
use crate::state::VerifyRecord;

/// Discrepancies listed at most on the verify page.
const SHOWN_DISCREPANCIES: usize = 50;

/// Recent actions, newest first.
pub(crate) fn actions_table<'a>(actions: impl Iterator<Item = &'a Action>) -> Markup {
    let actions: Vec<&Action> = actions.collect();
    html! {
        @if actions.is_empty() {
            p { "No change was made through this console since it started." }
        } @else {
            table #actions {
                thead { tr { th scope="col" { "When" } th scope="col" { "Who" } th scope="col" { "What" } th scope="col" { "Outcome" } } }
                tbody {
                    @for action in actions {
                        tr { td { (time(&action.at)) } td { (action.by) } td { (action.what) } td { (action.outcome) } }
                    }
                }
            }
        }
    }
}

/// The verify page: the last run and the button to run it.
pub(crate) fn verify(
    session: &Session,
    stream: Option<&str>,
    nats: bool,
    last: Option<&VerifyRecord>,
    can_change: bool,
) -> Markup {
    html! {
        p { "Verify compares the outbox table with the stream: every published row has its message in the stream, none twice, in aggregate order, and no pending row is stale (older than 5 minutes)." }
        @match stream {
            None => (super::notice("warn", "No stream is named for this console (the application's `.stream(..)`, or `outbox console --stream NAME`): verify cannot run.")),
            Some(_) if !nats => (super::notice("warn", "This console has no NATS connection (the application's `.nats(..)`, or `outbox console --nats-url URL`): verify cannot run.")),
            Some(stream) => {
                @if can_change {
                    form method="post" action=(session.href("/verify")) {
                        (csrf_field(session))
                        p { button.primary #run-verify type="submit" { "Verify against " (stream) " now" } }
                    }
                } @else {
                    p.muted { "Running it needs an operator the application authorises (it reads the whole stream)." }
                }
            }
        }
        h2 { "Last run" }
        @match last {
            None => p #verify-none { "Not run since the console started." },
            Some(record) => {
                p { "Run " (time(&record.at)) " by " (record.by) " against " code { (record.stream) } ", in " (format!("{:.1}", record.took.as_secs_f64())) " s." }
                @match &record.result {
                    Err(err) => (super::notice("bad", &format!("Verify failed: {err}"))),
                    Ok(outcome) => {
                        @let report = &outcome.report;
                        @if report.is_clean() {
                            p.notice.good #verify-result { "Clean: no discrepancy." }
                        } @else {
                            p.notice.bad #verify-result { (report.discrepancies.len()) " discrepanc" (if report.discrepancies.len() == 1 { "y" } else { "ies" }) "." }
                        }
                        dl.cards {
                            div { dt { "Rows checked" } dd { (report.rows_checked) } }
                            div { dt { "Stream messages" } dd { (report.messages_checked) } }
                            div { dt { "Aggregates" } dd { (report.aggregates_checked) } }
                            div { dt { "Messages without row" } dd { (report.messages_without_row) } }
                        }
                        p.muted { "Rows published " (outcome.within.map_or_else(|| "at any time".to_owned(), |w| format!("within {}", age(w)))) "." }
                        @if !report.is_clean() {
                            table #discrepancies {
                                thead { tr { th scope="col" { "Kind" } th scope="col" { "Details" } } }
                                tbody {
                                    @for discrepancy in report.discrepancies.iter().take(SHOWN_DISCREPANCIES) {
                                        tr { td { (discrepancy.kind()) } td { (describe(discrepancy)) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One discrepancy in words.
fn describe(discrepancy: &Discrepancy) -> String {
    discrepancy.to_string()
}

/// The health page: the service's parts, or why there are none here.
pub(crate) fn health(report: Option<&OutboxHealth>) -> Markup {
    html! {
        @match report {
            None => (super::notice("warn", "This console is served by the `outbox` command, not inside the service: it runs no processor and no subscriber. Their health is on the service's own console and at its /health/ready.")),
            Some(report) => {
                @if report.ok {
                    p.notice.good #health-summary { "Every part is ready." }
                } @else {
                    p.notice.bad #health-summary { "Not ready:" }
                    ul { @for problem in &report.problems { li { (problem) } } }
                }
                h2 { "Processor" }
                @match &report.processor {
                    None => p { "This service runs no processor." },
                    Some(processor) => {
                        dl.cards {
                            div class=(if processor.healthy { "" } else { "bad" }) { dt { "Healthy" } dd { (if processor.healthy { "yes" } else { "no" }) } }
                            div { dt { "Running" } dd { (if processor.running { "yes" } else { "no" }) } }
                            div { dt { "Since last claim" } dd { (age(processor.since_last_claim)) } }
                            div { dt { "Oldest pending (due)" } dd { (processor.oldest_pending_age.map_or_else(|| "–".to_owned(), age)) } }
                            div #processor-delayed { dt { "Delayed" } dd { (processor.delayed) } }
                            div #processor-blocked class=(if processor.blocked_aggregates > 0 { "bad" } else { "" }) { dt { "Blocked by a dead message" } dd { (processor.blocked_aggregates) } }
                        }
                    }
                }
                h2 { "Subscribers" }
                @if report.subscribers.is_empty() {
                    p { "This service runs no subscriber." }
                } @else {
                    table #subscribers {
                        thead { tr {
                            th scope="col" { "Durable" } th scope="col" { "Stream" } th scope="col" { "Ready" } th scope="col" { "Connected" }
                            th.n scope="col" { "Lag" } th.n scope="col" { "Awaiting ack" } th.n scope="col" { "In flight" } th.n scope="col" { "Held aggregates" } th scope="col" { "Problems" }
                        } }
                        tbody {
                            @for s in &report.subscribers {
                                tr {
                                    td { code { (s.durable) } } td { code { (s.stream) } }
                                    td { (if s.ready { "yes" } else { "no" }) } td { (if s.connected { "yes" } else { "no" }) }
                                    td.n { (s.pending.map_or_else(|| "–".to_owned(), |n| n.to_string())) }
                                    td.n { (s.ack_pending.map_or_else(|| "–".to_owned(), |n| n.to_string())) }
                                    td.n { (s.in_flight) }
                                    td.n { (s.held_aggregates.map_or_else(|| "–".to_owned(), |n| n.to_string())) }
                                    td { (s.problems.join("; ")) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The page after a change, or a refusal.
pub(crate) fn result(session: &Session, kind: &str, text: &str, back: &str) -> Markup {
    html! {
        (super::notice(kind, text))
        p { a #back href=(session.href(back)) { "Back" } " · " a href=(session.href("/")) { "Overview" } }
    }
}
