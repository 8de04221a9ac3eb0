//! The documented rules, written again from their documentation (not from
//! the code that enforces them), for the targets to hold the library to.

/// An event name (`txoutbox_core::naming`): at most 128 bytes, non-empty
/// dot-separated tokens of ASCII letters, digits, `_` and `-`.
pub fn is_event_name(name: &str) -> bool {
    name.len() <= 128
        && tokens(name, |b| {
            b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
        })
}

/// A subject to publish on (and a subject prefix): at most 255 bytes,
/// non-empty dot-separated tokens of printable ASCII, no whitespace, no `*`
/// or `>`.
pub fn is_subject(subject: &str) -> bool {
    subject.len() <= 255
        && tokens(subject, |b| {
            (0x21..=0x7e).contains(&b) && b != b'*' && b != b'>'
        })
}

fn tokens(text: &str, allowed: impl Fn(u8) -> bool) -> bool {
    !text.is_empty()
        && text
            .split('.')
            .all(|token| !token.is_empty() && token.bytes().all(&allowed))
}

/// A name of the wire contract (`wire::is_reserved`): `ce-*`, `nats-*`,
/// `content-type`, `traceparent`, `tracestate`, in any case.
pub fn is_reserved_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.starts_with("ce-")
        || lower.starts_with("nats-")
        || ["content-type", "traceparent", "tracestate"].contains(&lower.as_str())
}

/// An application header (`Headers`): a name of printable ASCII without
/// `:` or whitespace, not reserved; a value that arrives unchanged.
pub fn is_application_header(name: &str, value: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b':')
        && !is_reserved_header(name)
        && arrives_unchanged(value)
}

/// A header value that arrives as it was sent (`wire::check`): no line
/// break, no whitespace at either end (a NATS client trims values).
pub fn arrives_unchanged(value: &str) -> bool {
    !value.contains(['\r', '\n']) && value.trim() == value
}

/// A W3C `traceparent` as `TraceParent` documents it: four `-`-separated
/// fields of lowercase hex, version (2 digits, not `ff`; `00` means exactly
/// 55 characters), trace id (32, not all zero), parent id (16, not all
/// zero), flags (2).
pub fn is_traceparent(value: &str) -> bool {
    let fields: Vec<&str> = value.split('-').collect();
    let [version, trace_id, parent_id, flags] = fields.as_slice() else {
        return false;
    };
    let hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let zero = |s: &str| s.bytes().all(|b| b == b'0');
    hex(version, 2)
        && *version != "ff"
        && (*version != "00" || value.len() == 55)
        && hex(trace_id, 32)
        && !zero(trace_id)
        && hex(parent_id, 16)
        && !zero(parent_id)
        && hex(flags, 2)
}

/// A `tracestate` a `MessageContext` takes: printable ASCII, spaces
/// allowed but not at either end.
pub fn is_tracestate(value: &str) -> bool {
    value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
}

/// What a NATS header may carry (async-nats' `HeaderName` and
/// `HeaderValue` parsers): a name of printable ASCII without `:`, a value
/// without CR or LF.
pub fn nats_can_carry(name: &str, value: &str) -> bool {
    use std::str::FromStr;
    use txoutbox_nats::async_nats::{HeaderName, HeaderValue};
    HeaderName::from_str(name).is_ok() && HeaderValue::from_str(value).is_ok()
}

/// A URL (or comma-separated list of them) as `redact::redact_url`
/// documents it: in each, the credentials of the authority (which ends at
/// the first `/`, `?` or `#` after `scheme://`, and whose user info ends at
/// its last `@`) become `user:<redacted>`, or `<redacted>` for a token.
pub fn redacted_url(url: &str) -> String {
    let one = |url: &str| -> String {
        let (scheme, rest) = match url.find("://") {
            Some(at) => (&url[..at + 3], &url[at + 3..]),
            None => ("", url),
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let Some(at) = authority.rfind('@') else {
            return url.to_owned();
        };
        let user = match rest[..at].find(':') {
            Some(colon) => format!("{}:<redacted>", &rest[..colon]),
            None => "<redacted>".to_owned(),
        };
        format!("{scheme}{user}{}", &rest[at..])
    };
    url.split(',').map(one).collect::<Vec<_>>().join(",")
}

/// A time `ce-time` can carry: RFC 3339 writes the years 0000 to 9999.
pub fn is_rfc3339_time(at: chrono::DateTime<chrono::Utc>) -> bool {
    use chrono::Datelike;
    (0..=9999).contains(&at.year())
}
