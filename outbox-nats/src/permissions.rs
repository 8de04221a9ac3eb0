//! Permission violations the NATS server reported on connections made by
//! [`NatsConnect`](crate::NatsConnect).
//!
//! A server that refuses a publish or a subscription for want of a
//! permission answers nothing to the request itself: it sends the client a
//! `-ERR 'Permissions Violation for Publish to "<subject>"'`, which
//! async-nats hands only to the connection's event callback, while the
//! request waits for its timeout. Without more, a denied publish looks like
//! a slow broker (paused and retried for ever) and a denied JetStream API
//! call like a timeout. `NatsConnect`'s event callback records each
//! violation here, and the publisher and the subscriber's `build` look here
//! when a request times out, so they fail with [`PermissionDenied`] naming
//! the operation and the subject instead.
//!
//! The record is process-wide (async-nats gives the callback no handle on
//! the client) and short: the last [`KEPT`] violations, each consulted for
//! [`RECENT`].

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many violations are kept.
const KEPT: usize = 64;

/// How long after it was reported a violation explains a timeout.
pub(crate) const RECENT: Duration = Duration::from_secs(30);

/// What the server refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeniedOperation {
    /// Publishing to the subject (a JetStream API call or ack is a
    /// publish too).
    Publish,
    /// Subscribing to the subject.
    Subscribe,
}

impl std::fmt::Display for DeniedOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Publish => "publish to",
            Self::Subscribe => "subscribe to",
        })
    }
}

/// The NATS server refused an operation for want of a permission: grant
/// it to the user the service connects as (the operating chapter's "NATS
/// permissions" lists what each part needs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the NATS user may not {operation} `{subject}` (a permissions violation reported by the \
     server; grant it: see the operating chapter's \"NATS permissions\")"
)]
pub struct PermissionDenied {
    /// What was refused.
    pub operation: DeniedOperation,
    /// On which subject.
    pub subject: String,
}

impl PermissionDenied {
    /// The violation a server's error text reports, if it is one:
    /// `Permissions Violation for Publish to "x"` (or `Subscription to`),
    /// in any case, quoted or not.
    ///
    /// ```
    /// use txoutbox_nats::{DeniedOperation, PermissionDenied};
    /// let denied = PermissionDenied::parse("permissions violation for publish to \"shop.order.placed\"").unwrap();
    /// assert_eq!(denied.operation, DeniedOperation::Publish);
    /// assert_eq!(denied.subject, "shop.order.placed");
    /// assert!(PermissionDenied::parse("authorization violation").is_none());
    /// ```
    pub fn parse(server_error: &str) -> Option<Self> {
        let lower = server_error.to_ascii_lowercase();
        let at = lower.find("permissions violation for ")?;
        let rest = &server_error[at + "permissions violation for ".len()..];
        let rest_lower = rest.to_ascii_lowercase();
        let (operation, subject) = if rest_lower.starts_with("publish to ") {
            (DeniedOperation::Publish, &rest["publish to ".len()..])
        } else if rest_lower.starts_with("subscription to ") {
            (
                DeniedOperation::Subscribe,
                &rest["subscription to ".len()..],
            )
        } else {
            return None;
        };
        let subject = subject
            .split_whitespace()
            .next()?
            .trim_matches(|c| c == '"' || c == '\'');
        if subject.is_empty() {
            return None;
        }
        Some(Self {
            operation,
            subject: subject.to_owned(),
        })
    }
}

/// The violations reported lately, newest last.
static REPORTED: Mutex<VecDeque<(Instant, PermissionDenied)>> = Mutex::new(VecDeque::new());

/// Records the violation `server_error` reports, if it is one, and returns
/// it.
pub(crate) fn record(server_error: &str) -> Option<PermissionDenied> {
    let denied = PermissionDenied::parse(server_error)?;
    let mut reported = REPORTED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if reported.len() == KEPT {
        reported.pop_front();
    }
    reported.push_back((Instant::now(), denied.clone()));
    Some(denied)
}

/// The newest violation reported within [`RECENT`] that `matches`.
pub(crate) fn recent(matches: impl Fn(&PermissionDenied) -> bool) -> Option<PermissionDenied> {
    let reported = REPORTED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    reported
        .iter()
        .rev()
        .take_while(|(at, _)| at.elapsed() <= RECENT)
        .find(|(_, denied)| matches(denied))
        .map(|(_, denied)| denied.clone())
}

/// A violation reported lately for a publish to `subject`.
pub(crate) fn publish_denied(subject: &str) -> Option<PermissionDenied> {
    recent(|denied| denied.operation == DeniedOperation::Publish && denied.subject == subject)
}

/// A violation reported lately for a JetStream API call (`$JS.API.…`) or
/// the subscription its reply needs.
pub(crate) fn jetstream_api_denied() -> Option<PermissionDenied> {
    recent(|denied| match denied.operation {
        DeniedOperation::Publish => denied.subject.starts_with("$JS.API."),
        DeniedOperation::Subscribe => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_are_read() {
        let denied =
            PermissionDenied::parse("Permissions Violation for Subscription to \"_INBOX.abc.*\"")
                .expect("a violation");
        assert_eq!(denied.operation, DeniedOperation::Subscribe);
        assert_eq!(denied.subject, "_INBOX.abc.*");
        let denied =
            PermissionDenied::parse("nats: permissions violation for publish to $JS.API.INFO")
                .expect("unquoted");
        assert_eq!(denied.subject, "$JS.API.INFO");
        assert!(PermissionDenied::parse("permissions violation for publish to \"\"").is_none());
        assert!(PermissionDenied::parse("maximum payload exceeded").is_none());
    }

    #[test]
    fn recorded_violations_explain_later_timeouts() {
        let subject = "test.permissions.recorded";
        assert!(publish_denied(subject).is_none());
        record(&format!(
            "Permissions Violation for Publish to \"{subject}\""
        ));
        let denied = publish_denied(subject).expect("recorded");
        assert!(denied.to_string().contains(subject), "{denied}");
        assert!(publish_denied("test.permissions.other").is_none());
    }
}
