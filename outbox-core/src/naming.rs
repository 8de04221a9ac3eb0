//! Validation of event names, subjects and subject prefixes.

use std::fmt;

// The rules themselves live in `outbox-naming`, which the derive macros use
// too: the compile-time and the start-up checks can never disagree.
use txoutbox_naming as rules;

/// The longest accepted event name and subject, in bytes (the outbox
/// table's column widths): the rules' own constants, one item each.
pub use rules::{MAX_EVENT_NAME_LEN, MAX_SUBJECT_LEN};

/// What kind of identifier failed validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameKind {
    /// An event's wire name, e.g. `order.placed`.
    EventName,
    /// A NATS subject, e.g. `events.order.placed`.
    Subject,
    /// A subject prefix, e.g. `events`.
    SubjectPrefix,
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameKind::EventName => "event name",
            NameKind::Subject => "subject",
            NameKind::SubjectPrefix => "subject prefix",
        })
    }
}

/// An event name or subject that breaks the naming rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} `{value}` {reason}")]
#[non_exhaustive]
pub struct InvalidName {
    /// What was being validated.
    pub kind: NameKind,
    /// The offending value.
    pub value: String,
    /// Which rule it breaks.
    pub reason: &'static str,
}

/// Checks an event's wire name: dot-separated tokens of ASCII letters, digits,
/// `_` and `-`, at most [`MAX_EVENT_NAME_LEN`] bytes.
///
/// ```
/// use txoutbox_core::naming::validate_event_name;
/// assert!(validate_event_name("order.placed").is_ok());
/// assert!(validate_event_name("order placed").is_err());
/// ```
pub fn validate_event_name(name: &str) -> Result<(), InvalidName> {
    rules::check_event_name(name).map_err(|reason| InvalidName {
        kind: NameKind::EventName,
        value: name.to_owned(),
        reason,
    })
}

/// Checks a subject that messages are published on: non-empty dot-separated
/// tokens of printable ASCII, no wildcards, at most [`MAX_SUBJECT_LEN`] bytes.
///
/// ```
/// use txoutbox_core::naming::validate_subject;
/// assert!(validate_subject("events.order.placed").is_ok());
/// assert!(validate_subject("events.>").is_err());
/// ```
pub fn validate_subject(subject: &str) -> Result<(), InvalidName> {
    rules::check_subject(subject).map_err(|reason| InvalidName {
        kind: NameKind::Subject,
        value: subject.to_owned(),
        reason,
    })
}

pub(crate) fn validate_prefix(prefix: &str) -> Result<(), InvalidName> {
    rules::check_subject(prefix).map_err(|reason| InvalidName {
        kind: NameKind::SubjectPrefix,
        value: prefix.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names() {
        for ok in ["order.placed", "a", "Order-Placed_v2.x9"] {
            assert!(validate_event_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".a", "a.", "a..b", "a b", "a*", "a>", "ordér", "a/b"] {
            let err = validate_event_name(bad).unwrap_err();
            assert_eq!(err.kind, NameKind::EventName);
            assert_eq!(err.value, bad);
        }
        assert!(validate_event_name(&"a".repeat(MAX_EVENT_NAME_LEN)).is_ok());
        assert!(validate_event_name(&"a".repeat(MAX_EVENT_NAME_LEN + 1)).is_err());
    }

    #[test]
    fn subjects() {
        for ok in ["events.order.placed", "a", "$JS-ish.x/y:z"] {
            assert!(validate_subject(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a.", ".a", "a..b", "a.*", "a.>", "a b", "a\tb", "é"] {
            assert!(validate_subject(bad).is_err(), "{bad:?}");
        }
        assert!(validate_subject(&"a".repeat(MAX_SUBJECT_LEN + 1)).is_err());
    }

    #[test]
    fn error_message_names_the_value_and_the_rule() {
        let err = validate_subject("a..b").unwrap_err();
        assert_eq!(
            err.to_string(),
            "subject `a..b` has an empty token (leading, trailing or doubled `.`)"
        );
    }
}
