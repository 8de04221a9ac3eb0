//! The pages, as HTML (`maud`, which escapes every value): the layout every
//! page shares and the pieces several pages use. Each submodule renders one
//! area; `crate::routes` reads what they show and answers with them.

pub(crate) mod bulk_release;
pub(crate) mod chart;
pub(crate) mod consumers;
pub(crate) mod dead;
pub(crate) mod overview;
pub(crate) mod status;

use std::time::Duration;

use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use crate::operator::Operator;
use crate::security::Session;

/// The stylesheet every page links (`/console.css`): readable tables, a
/// visible focus ring, nothing a script would need.
pub(crate) const STYLESHEET: &str = include_str!("console.css");

/// The sections of the navigation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Overview,
    Dead,
    Consumers,
    Verify,
    Health,
    Actions,
}

impl Section {
    const ALL: [(Section, &'static str, &'static str); 6] = [
        (Section::Overview, "/", "Overview"),
        (Section::Dead, "/dead", "Dead messages"),
        (Section::Consumers, "/consumers", "Consumers"),
        (Section::Verify, "/verify", "Verify"),
        (Section::Health, "/health", "Health"),
        (Section::Actions, "/actions", "Recent actions"),
    ];
}

/// What the layout needs besides the body.
pub(crate) struct Frame<'a> {
    pub(crate) title: String,
    pub(crate) section: Section,
    pub(crate) session: &'a Session,
    pub(crate) operator: Option<&'a Operator>,
    /// The console has an authorisation hook.
    pub(crate) changes_possible: bool,
    /// Reload every this long (read pages); `None` on forms and results.
    pub(crate) refresh: Option<Duration>,
}

/// A whole page: head, navigation, who is looking, the body.
pub(crate) fn layout(frame: &Frame<'_>, body: Markup) -> Markup {
    let session = frame.session;
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(every) = frame.refresh.filter(|d| !d.is_zero()) {
                    meta http-equiv="refresh" content=(every.as_secs().max(1));
                }
                title { (frame.title) " · outbox console" }
                link rel="stylesheet" href=(session.href("/console.css"));
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header {
                    nav aria-label="Console" {
                        ul {
                            @for (section, path, label) in Section::ALL {
                                li {
                                    @if section == frame.section {
                                        a href=(session.href(path)) aria-current="page" { (label) }
                                    } @else {
                                        a href=(session.href(path)) { (label) }
                                    }
                                }
                            }
                        }
                    }
                    p.who {
                        @match (frame.operator, frame.changes_possible) {
                            (Some(operator), _) => { "Signed in as " strong { (operator) } }
                            (None, true) => { "Read-only for you: the application does not authorise you to change anything." }
                            (None, false) => { "Read-only: no authorisation hook was given, so nothing can be changed here." }
                        }
                    }
                }
                main #main {
                    h1 { (frame.title) }
                    (body)
                }
                footer {
                    @if let Some(every) = frame.refresh.filter(|d| !d.is_zero()) {
                        p { "This page reloads every " (every.as_secs().max(1)) " s. Rendered " (Utc::now().format("%Y-%m-%d %H:%M:%S UTC")) "." }
                    }
                }
            }
        }
    }
}

/// A short notice (an error, a refusal, a result).
pub(crate) fn notice(kind: &str, text: &str) -> Markup {
    html! { p class=(format!("notice {kind}")) role="status" { (text) } }
}

/// A duration as people read it: `3 s`, `4 min 10 s`, `2 h 5 min`, `3 d 4 h`.
pub(crate) fn age(duration: Duration) -> String {
    let s = duration.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86400 => format!("{} h {} min", s / 3600, (s % 3600) / 60),
        _ => format!("{} d {} h", s / 86400, (s % 86400) / 3600),
    }
}

/// A time as `2026-11-26 13:45:12 UTC`.
pub(crate) fn time(at: &DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// The hidden field carrying the session's CSRF token.
pub(crate) fn csrf_field(session: &Session) -> Markup {
    html! { input type="hidden" name="csrf" value=(session.csrf); }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_people_write_them() {
        assert_eq!(age(Duration::from_secs(5)), "5 s");
        assert_eq!(age(Duration::from_secs(250)), "4 min 10 s");
        assert_eq!(age(Duration::from_secs(7500)), "2 h 5 min");
        assert_eq!(age(Duration::from_secs(3 * 86400 + 4 * 3600)), "3 d 4 h");
    }
}
