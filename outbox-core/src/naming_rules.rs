// The rules for event names and NATS subjects, in one file.
//
// `outbox-macros` includes this file verbatim (`#[path]`), so the derive's
// compile-time checks and the registry's start-up checks can never disagree.
// It must therefore stay free of any dependency: plain `core` only.

/// Longest accepted event name, in bytes (the outbox table's column width).
pub(crate) const MAX_EVENT_NAME_LEN: usize = 128;

/// Longest accepted subject, in bytes (the outbox table's column width).
pub(crate) const MAX_SUBJECT_LEN: usize = 255;

/// Checks an event's wire name: dot-separated tokens of ASCII letters,
/// digits, `_` and `-`, e.g. `order.placed`.
pub(crate) fn check_event_name(name: &str) -> Result<(), &'static str> {
    if name.len() > MAX_EVENT_NAME_LEN {
        return Err("is longer than 128 bytes");
    }
    check_tokens(name, |c| c.is_ascii_alphanumeric() || c == '_' || c == '-').map_err(|e| match e {
        TokenError::Empty => "is empty",
        TokenError::EmptyToken => "has an empty token (leading, trailing or doubled `.`)",
        TokenError::BadChar => {
            "may only contain ASCII letters, digits, `_`, `-` and `.` between tokens"
        }
    })
}

/// Checks a NATS subject that events are published on: dot-separated, non-empty
/// tokens of printable ASCII without wildcards (`*`, `>`) or whitespace.
pub(crate) fn check_subject(subject: &str) -> Result<(), &'static str> {
    if subject.len() > MAX_SUBJECT_LEN {
        return Err("is longer than 255 bytes");
    }
    check_tokens(subject, |c| c.is_ascii_graphic() && c != '*' && c != '>').map_err(|e| match e {
        TokenError::Empty => "is empty",
        TokenError::EmptyToken => "has an empty token (leading, trailing or doubled `.`)",
        TokenError::BadChar => {
            "may only contain printable ASCII without whitespace or the wildcards `*` and `>`"
        }
    })
}

enum TokenError {
    Empty,
    EmptyToken,
    BadChar,
}

fn check_tokens(value: &str, allowed: impl Fn(char) -> bool) -> Result<(), TokenError> {
    if value.is_empty() {
        return Err(TokenError::Empty);
    }
    for token in value.split('.') {
        if token.is_empty() {
            return Err(TokenError::EmptyToken);
        }
        if !token.chars().all(&allowed) {
            return Err(TokenError::BadChar);
        }
    }
    Ok(())
}
