//! The confirmation of a bulk release of a consumer's held aggregates: the
//! selected ones, or all (of an aggregate type, a reason).

use maud::{Markup, html};
use txoutbox_core::consumer::Release;

use super::consumers::bulk_href;
use super::csrf_field;
use crate::security::Session;

/// A bulk release about to be done, as its confirmation shows it.
pub(crate) struct PlannedRelease {
    /// The consumer.
    pub(crate) consumer: String,
    /// Retry or skip, for all of them.
    pub(crate) how: Release,
    /// How many holds it releases now.
    pub(crate) count: u64,
    /// What it takes: "the 3 selected" or the filter.
    pub(crate) what: String,
    /// The first few holds, one line each.
    pub(crate) lines: Vec<String>,
    /// The same holds' aggregates (`type/id`), for the audit log.
    pub(crate) names: Vec<String>,
    /// The form fields that name them again on the `POST`.
    pub(crate) selector: Vec<(&'static str, String)>,
}

/// The confirmation form.
pub(crate) fn confirm(session: &Session, operator: &str, planned: &PlannedRelease) -> Markup {
    let more = planned.count.saturating_sub(planned.lines.len() as u64);
    html! {
        p.notice.warn #confirm-summary {
            "Release " (planned.count) " held aggregate(s) of consumer " code { (planned.consumer) }
            " (" (planned.what) "), oldest hold first: "
            @match planned.how {
                Release::Retry => "apply the message each is held behind again (its cause is fixed), then the messages parked behind it, in order.",
                Release::Skip => "leave the message each is held behind unapplied for good (recorded as processed), then apply the messages parked behind it, in order.",
            }
        }
        ul #confirm-lines {
            @for line in &planned.lines { li { (line) } }
            @if more > 0 { li { "… and " (more) " more" } }
        }
        form method="post" action=(bulk_href(session, &planned.consumer)) {
            (csrf_field(session))
            @for (name, value) in &planned.selector {
                input type="hidden" name=(name) value=(value);
            }
            input type="hidden" name="how" value=(planned.how.as_str());
            p { "As " strong { (operator) } "." }
            p {
                button.danger #confirm type="submit" name="confirm" value="yes" {
                    "Confirm release of " (planned.count) " (" (planned.how.as_str()) ")"
                }
                " "
                a href=(session.href("/consumers")) { "Cancel" }
            }
        }
    }
}
