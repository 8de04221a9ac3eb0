//! The rules for event names and NATS subjects, in one place.
//!
//! [`txoutbox-core`](https://docs.rs/txoutbox-core) checks names with them at
//! start-up (`txoutbox_core::naming`, with typed errors) and
//! [`txoutbox-macros`](https://docs.rs/txoutbox-macros) at compile time
//! (`#[derive(IntegrationEvent)]`), so the two can never disagree. Depend on
//! `txoutbox-core` and use `txoutbox_core::naming` (typed errors) instead of
//! this crate, whose API serves those two crates.
//!
//! ```
//! assert!(txoutbox_naming::check_event_name("order.placed").is_ok());
//! assert_eq!(txoutbox_naming::check_subject("events.>"), Err(
//!     "may only contain printable ASCII without whitespace or the wildcards `*` and `>`"
//! ));
//! ```
//!
//! See the [workspace README](https://github.com/txoutbox/txoutbox#readme).
//!
//! Free of any dependency, `no_std` and without allocation: a proc-macro
//! crate and a runtime crate both build it cheaply.

#![no_std]

/// Longest accepted event name, in bytes (the outbox table's column width).
pub const MAX_EVENT_NAME_LEN: usize = 128;

/// Longest accepted subject, in bytes (the outbox table's column width).
pub const MAX_SUBJECT_LEN: usize = 255;

/// Checks an event's wire name: dot-separated tokens of ASCII letters,
/// digits, `_` and `-`, e.g. `order.placed`.
pub fn check_event_name(name: &str) -> Result<(), &'static str> {
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
pub fn check_subject(subject: &str) -> Result<(), &'static str> {
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

/// This crate's README (crates.io's page), whose examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
