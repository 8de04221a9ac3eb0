//! Dead messages: the list (with the bulk forms), one message (envelope,
//! redacted headers and payload, what waits behind it), and the
//! confirmation of a requeue or a skip.

use maud::{Markup, html};
use txoutbox_core::store::EventStats;
use txoutbox_sea_orm::admin::{AggregateQueue, DeadMessage, MessageState, StoredMessage};

use super::{csrf_field, time};
use crate::security::Session;

/// The list of dead messages; `can_change`: show the forms.
pub(crate) fn list(
    session: &Session,
    dead: &[DeadMessage],
    by_event: &[EventStats],
    skipped: &[StoredMessage],
    can_change: bool,
) -> Markup {
    let confirm = session.href("/dead/confirm");
    html! {
        @if dead.is_empty() {
            p #no-dead { "No dead message." }
        } @else {
            form method="get" action=(confirm) {
                table #dead-messages {
                    caption { "Oldest first. A dead message holds back the later messages of its aggregate until it is requeued or skipped." }
                    thead { tr {
                        @if can_change { th scope="col" { span.muted { "Select" } } }
                        th scope="col" { "Message" } th scope="col" { "Event" } th scope="col" { "Aggregate" }
                        th.n scope="col" { "Attempts" } th scope="col" { "Why" } th.n scope="col" { "Waiting behind" }
                    } }
                    tbody {
                        @for message in dead {
                            tr {
                                @if can_change {
                                    td {
                                        input type="checkbox" name="id" value=(message.id) id=(format!("select-{}", message.id))
                                            aria-label=(format!("Select {} of {}/{}", message.event_name, message.aggregate_type, message.aggregate_id));
                                    }
                                }
                                td { a href=(session.href(&format!("/dead/{}", message.id))) { code { (message.id) } } }
                                td { code { (message.event_name) } }
                                td { code { (message.aggregate_type) "/" (message.aggregate_id) } " #" (message.sequence) }
                                td.n { (message.attempts) }
                                td { (message.last_error.as_deref().unwrap_or("–")) }
                                td.n { (message.waiting_behind) }
                            }
                        }
                    }
                }
                @if can_change {
                    p {
                        button type="submit" name="action" value="requeue" { "Requeue selected…" }
                        " "
                        button type="submit" name="action" value="skip" { "Skip selected…" }
                    }
                }
            }
            @if can_change {
                h2 { "In bulk" }
                form method="get" action=(confirm) {
                    input type="hidden" name="action" value="requeue";
                    label for="event" { "Every dead message of event" }
                    select #event name="event" {
                        @for event in by_event.iter().filter(|e| e.dead > 0) {
                            option value=(event.event_name) { (event.event_name) " (" (event.dead) ")" }
                        }
                    }
                    " " button type="submit" { "Requeue by event…" }
                }
                form method="get" action=(confirm) {
                    input type="hidden" name="action" value="requeue";
                    input type="hidden" name="all" value="yes";
                    p { button type="submit" { "Requeue all dead messages…" } }
                }
            }
        }
        h2 { "Recently skipped" }
        @if skipped.is_empty() {
            p { "No skipped message." }
        } @else {
            table #skipped-messages {
                thead { tr { th scope="col" { "Message" } th scope="col" { "Aggregate" } th scope="col" { "Skipped" } th scope="col" { "By" } th scope="col" { "Why" } } }
                tbody {
                    @for message in skipped {
                        @if let MessageState::Skipped { at, by, reason } = &message.state {
                            tr {
                                td { a href=(session.href(&format!("/dead/{}", message.id))) { code { (message.event_name) } } }
                                td { code { (message.aggregate_type) "/" (message.aggregate_id) } " #" (message.sequence) }
                                td { (time(at)) }
                                td { (by.as_deref().unwrap_or("–")) }
                                td { (reason.as_deref().unwrap_or("–")) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One message: its envelope, headers and payload (already redacted), its
/// state, and what waits behind it.
pub(crate) fn show(
    session: &Session,
    message: &StoredMessage,
    headers: Option<&str>,
    payload: &str,
    behind: &AggregateQueue,
    can_change: bool,
) -> Markup {
    let id = message.id.to_string();
    html! {
        dl.cards {
            div { dt { "State" } dd class=(format!("state-{}", message.state.name())) { (message.state.name()) } }
            div { dt { "Attempts" } dd { (message.attempts) } }
            div { dt { "Waiting behind" } dd { (behind.unsettled) } }
        }
        @if matches!(message.state, MessageState::Dead) && can_change {
            p {
                a.button href=(session.href(&format!("/dead/confirm?action=requeue&id={id}"))) { "Requeue…" }
                " "
                a.button href=(session.href(&format!("/dead/confirm?action=skip&id={id}"))) { "Skip…" }
            }
        }
        @if let Some(error) = &message.last_error {
            h2 { "Last error" }
            pre #last-error { (error) }
        }
        h2 { "Envelope" }
        table #envelope {
            tbody {
                tr { th scope="row" { "Id" } td { code { (id) } } }
                tr { th scope="row" { "Event" } td { code { (message.event_name) } " v" (message.event_version) } }
                tr { th scope="row" { "Subject" } td { code { (message.subject) } } }
                tr { th scope="row" { "Aggregate" } td { code { (message.aggregate_type) "/" (message.aggregate_id) } " #" (message.sequence) } }
                tr { th scope="row" { "Occurred" } td { (time(&message.occurred_at)) } }
                tr { th scope="row" { "Written" } td { (time(&message.created_at)) } }
                tr { th scope="row" { "Correlation" } td { code { (message.correlation_id) } } }
                tr { th scope="row" { "Causation" } td { code { (message.causation_id.as_deref().unwrap_or("–")) } } }
                tr { th scope="row" { "Tenant" } td { (message.tenant.as_deref().unwrap_or("–")) } }
                tr { th scope="row" { "Trace" } td { code { (message.traceparent.as_deref().unwrap_or("–")) } } }
                @if let MessageState::Skipped { at, by, reason } = &message.state {
                    tr { th scope="row" { "Skipped" } td { (time(at)) " by " (by.as_deref().unwrap_or("–")) ": " (reason.as_deref().unwrap_or("no reason given")) } }
                }
            }
        }
        h2 { "Headers" }
        pre #headers { (headers.unwrap_or("none")) }
        h2 { "Payload" }
        p.muted { "Fields whose names say they are secret are shown as <redacted>." }
        pre #payload { (payload) }
        h2 { "Waiting behind it" }
        @if behind.messages.is_empty() {
            p { "Nothing." }
        } @else {
            table #waiting {
                thead { tr { th scope="col" { "Sequence" } th scope="col" { "Event" } th scope="col" { "State" } } }
                tbody {
                    @for waiting in &behind.messages {
                        tr { td.n { (waiting.sequence) } td { code { (waiting.event_name) } } td { (waiting.state.name()) } }
                    }
                }
            }
            @if behind.unsettled > behind.messages.len() as u64 {
                p.muted { "… and " (behind.unsettled - behind.messages.len() as u64) " more." }
            }
        }
    }
}

/// What a requeue or skip will touch, for the confirmation page.
pub(crate) struct Planned {
    /// `requeue` or `skip`.
    pub(crate) action: &'static str,
    /// Hidden fields carrying the selector back (`id`, `event`, `all`).
    pub(crate) selector: Vec<(&'static str, String)>,
    /// One line each of what is touched.
    pub(crate) lines: Vec<String>,
    /// The sentence the operator confirms.
    pub(crate) summary: String,
}

/// The confirmation form of a requeue or a skip.
pub(crate) fn confirm(session: &Session, operator: &str, planned: &Planned) -> Markup {
    html! {
        p.notice.warn #confirm-summary { (planned.summary) }
        @if !planned.lines.is_empty() {
            ul #confirm-lines { @for line in &planned.lines { li { (line) } } }
        }
        form method="post" action=(session.href(&format!("/dead/{}", planned.action))) {
            (csrf_field(session))
            @for (name, value) in &planned.selector {
                input type="hidden" name=(name) value=(value);
            }
            @if planned.action == "skip" {
                p.muted { "Skipped messages are never published: the messages behind them are published next, in order." }
                p {
                    label for="reason" { "Why (kept on the message with your name)" }
                    br;
                    textarea #reason name="reason" rows="2" required {}
                }
            }
            p { "As " strong { (operator) } "." }
            p {
                button.danger #confirm type="submit" name="confirm" value="yes" {
                    (if planned.action == "skip" { "Confirm skip" } else { "Confirm requeue" })
                }
                " "
                a href=(session.href("/dead")) { "Cancel" }
            }
        }
    }
}
