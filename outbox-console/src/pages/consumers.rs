//! Consumers: each one's lag from NATS and its held aggregates (from its
//! inbox), with the release forms: one, the selected, all (see
//! `bulk_release` for their confirmation).

use maud::{Markup, html};
use txoutbox_core::consumer::{Hold, Release};

use super::{csrf_field, time};
use crate::security::Session;

/// A consumer's position in its stream, from NATS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lag {
    /// Messages not yet delivered to it.
    pub(crate) pending: u64,
    /// Delivered, not yet acknowledged.
    pub(crate) ack_pending: usize,
    /// Delivered more than once.
    pub(crate) redelivered: usize,
    /// The last stream sequence delivered.
    pub(crate) delivered: u64,
}

/// One consumer as the page shows it.
pub(crate) struct ConsumerView {
    pub(crate) name: String,
    pub(crate) stream: Option<String>,
    /// `None` without NATS or a stream.
    pub(crate) lag: Option<Result<Lag, String>>,
    pub(crate) holds: Result<Vec<Hold>, String>,
}

/// Every consumer; `can_change`: show the release links.
pub(crate) fn list(session: &Session, consumers: &[ConsumerView], can_change: bool) -> Markup {
    html! {
        @if consumers.is_empty() {
            p { "No consumer is named: the application (or `outbox console --consumer NAME`) names the consumers to show." }
        }
        @for consumer in consumers {
            section aria-labelledby=(format!("consumer-{}", consumer.name)) {
                h2 id=(format!("consumer-{}", consumer.name)) { "Consumer " code { (consumer.name) } }
                @match &consumer.lag {
                    None => p.muted { "Lag unknown: the console has no NATS connection or stream for it." },
                    Some(Err(err)) => (super::notice("bad", &format!("Lag unknown: {err}"))),
                    Some(Ok(lag)) => {
                        dl.cards aria-label="Lag" {
                            div class=(if lag.pending > 0 { "lag" } else { "" }) { dt { "Lag (undelivered)" } dd.lag { (lag.pending) } }
                            div { dt { "Awaiting ack" } dd { (lag.ack_pending) } }
                            div { dt { "Redelivered" } dd { (lag.redelivered) } }
                            div { dt { "Last delivered" } dd { (lag.delivered) } }
                        }
                        p.muted { "On stream " code { (consumer.stream.as_deref().unwrap_or("?")) } "." }
                    }
                }
                h3 { "Held aggregates" }
                @match &consumer.holds {
                    Err(err) => (super::notice("bad", &format!("Held aggregates unknown: {err}"))),
                    Ok(holds) if holds.is_empty() => p { "None held." },
                    Ok(holds) => {
                        (holds_table(session, &consumer.name, holds, can_change))
                        @if can_change {
                            (release_all_form(session, &consumer.name))
                        }
                    }
                }
            }
        }
    }
}

/// A consumer's held aggregates, oldest first; `can_change`: with the
/// release links and a checkbox on each hold not released yet.
fn holds_table(session: &Session, consumer: &str, holds: &[Hold], can_change: bool) -> Markup {
    let table = html! {
        table.holds id=(format!("holds-{consumer}")) {
            caption { "Oldest hold first." }
            thead { tr {
                @if can_change { th scope="col" { span.muted { "Select" } } }
                th scope="col" { "Aggregate" } th scope="col" { "Held behind" } th scope="col" { "Why" }
                th scope="col" { "Since" } th.n scope="col" { "Parked" } th scope="col" { "Release" }
            } }
            tbody {
                @for hold in holds {
                    tr {
                        @if can_change {
                            td {
                                @if hold.release.is_none() {
                                    input type="checkbox" name="hold" value=(hold.message_id)
                                        aria-label=(format!("Select {}/{}", hold.aggregate_type, hold.aggregate_id));
                                }
                            }
                        }
                        td { code { (hold.aggregate_type) "/" (hold.aggregate_id) } }
                        td { code { (hold.event_name) } br; span.muted { (hold.message_id) } }
                        td { (hold.reason) }
                        td { (hold.held_since.as_ref().map_or_else(|| "–".to_owned(), time)) }
                        td.n { (hold.waiting) }
                        td {
                            @if let Some(release) = hold.release {
                                "released (" (release.as_str()) "), being applied"
                            } @else if can_change {
                                a href=(release_href(session, consumer, hold, Release::Retry)) { "Retry…" }
                                " · "
                                a href=(release_href(session, consumer, hold, Release::Skip)) { "Skip…" }
                            } @else {
                                "held"
                            }
                        }
                    }
                }
            }
        }
    };
    if !can_change {
        return table;
    }
    html! {
        form method="get" action=(bulk_href(session, consumer)) {
            (table)
            p {
                button type="submit" name="how" value="retry" { "Release selected (retry)…" }
                " "
                button type="submit" name="how" value="skip" { "Release selected (skip)…" }
            }
        }
    }
}

/// The form that releases every hold of `consumer` not released yet, or
/// those of an aggregate type or a reason.
fn release_all_form(session: &Session, consumer: &str) -> Markup {
    html! {
        form method="get" action=(bulk_href(session, consumer)) {
            input type="hidden" name="all" value="yes";
            p {
                label { "Aggregate type " input type="text" name="aggregate_type" placeholder="any"; }
                " "
                label { "Reason contains " input type="text" name="reason" placeholder="anything"; }
            }
            p {
                button type="submit" name="how" value="retry" { "Release all (retry)…" }
                " "
                button type="submit" name="how" value="skip" { "Release all (skip)…" }
            }
        }
    }
}

/// Where the bulk release of `consumer` is confirmed and done.
pub(crate) fn bulk_href(session: &Session, consumer: &str) -> String {
    session.href(&format!("/consumers/{}/release-many", encode(consumer)))
}

fn release_href(session: &Session, consumer: &str, hold: &Hold, how: Release) -> String {
    session.href(&format!(
        "/consumers/{}/release?aggregate_type={}&aggregate_id={}&how={}",
        encode(consumer),
        encode(&hold.aggregate_type),
        encode(&hold.aggregate_id),
        how.as_str()
    ))
}

/// Percent-encodes everything but unreserved characters.
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The confirmation of a release.
pub(crate) fn confirm_release(
    session: &Session,
    operator: &str,
    consumer: &str,
    hold: &Hold,
    how: Release,
) -> Markup {
    html! {
        p.notice.warn #confirm-summary {
            "Release " code { (hold.aggregate_type) "/" (hold.aggregate_id) } " of consumer " code { (consumer) } ": "
            @match how {
                Release::Retry => { "apply " code { (hold.event_name) } " again (its cause is fixed), then the " (hold.waiting) " message(s) parked behind it, in order." }
                Release::Skip => { "leave " code { (hold.event_name) } " unapplied for good (recorded as processed), then apply the " (hold.waiting) " message(s) parked behind it, in order." }
            }
        }
        p { "It is held because: " (hold.reason) }
        form method="post" action=(session.href(&format!("/consumers/{}/release", encode(consumer)))) {
            (csrf_field(session))
            input type="hidden" name="aggregate_type" value=(hold.aggregate_type);
            input type="hidden" name="aggregate_id" value=(hold.aggregate_id);
            input type="hidden" name="how" value=(how.as_str());
            p { "As " strong { (operator) } "." }
            p {
                button.danger #confirm type="submit" name="confirm" value="yes" {
                    (match how { Release::Retry => "Confirm release (retry)", Release::Skip => "Confirm release (skip)" })
                }
                " "
                a href=(session.href("/consumers")) { "Cancel" }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_path_and_query_parts() {
        assert_eq!(super::encode("order/42 a&b"), "order%2F42%20a%26b");
        assert_eq!(super::encode("c_1-x.y~"), "c_1-x.y~");
    }
}
