//! W3C Trace Context (`traceparent`) carried in the envelope.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A validated W3C [`traceparent`](https://www.w3.org/TR/trace-context/#traceparent-header)
/// value, e.g. `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`.
///
/// The envelope carries it so a consumer's span continues the producer's trace.
/// The outbox does not depend on a tracing backend: set it on the
/// [`MessageContext`](crate::MessageContext) from whatever propagator the
/// service uses (OpenTelemetry, an incoming HTTP header, ...).
///
/// ```
/// use txoutbox_core::TraceParent;
/// let tp: TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse().unwrap();
/// assert_eq!(tp.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert!(tp.is_sampled());
/// assert!("00-00000000000000000000000000000000-00f067aa0ba902b7-01".parse::<TraceParent>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TraceParent(String);

/// A `traceparent` value that does not follow the W3C format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid traceparent `{value}`: {reason}")]
#[non_exhaustive]
pub struct InvalidTraceParent {
    /// The rejected value.
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl TraceParent {
    /// The 32-hex-digit trace id.
    pub fn trace_id(&self) -> &str {
        &self.0[3..35]
    }

    /// The 16-hex-digit id of the parent span.
    pub fn parent_id(&self) -> &str {
        &self.0[36..52]
    }

    /// Whether the `sampled` flag is set.
    pub fn is_sampled(&self) -> bool {
        self.flags() & 1 == 1
    }

    /// The flags byte (bit 0: sampled); 0 when unreadable.
    pub fn flags(&self) -> u8 {
        u8::from_str_radix(&self.0[53..55], 16).unwrap_or(0)
    }

    /// The header value.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn check(value: &str) -> Result<(), &'static str> {
    let parts: Vec<&str> = value.split('-').collect();
    let [version, trace_id, parent_id, flags] = parts.as_slice() else {
        return Err("expected four `-`-separated fields");
    };
    let is_lower_hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !is_lower_hex(version, 2) || *version == "ff" {
        return Err("version must be two lowercase hex digits other than `ff`");
    }
    if *version == "00" && value.len() != 55 {
        return Err("version 00 has exactly 55 characters");
    }
    if !is_lower_hex(trace_id, 32) || trace_id.bytes().all(|b| b == b'0') {
        return Err("trace id must be 32 lowercase hex digits, not all zero");
    }
    if !is_lower_hex(parent_id, 16) || parent_id.bytes().all(|b| b == b'0') {
        return Err("parent id must be 16 lowercase hex digits, not all zero");
    }
    if !is_lower_hex(flags, 2) {
        return Err("flags must be two lowercase hex digits");
    }
    Ok(())
}

impl FromStr for TraceParent {
    type Err = InvalidTraceParent;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::try_from(s.to_owned())
    }
}

impl TryFrom<String> for TraceParent {
    type Error = InvalidTraceParent;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        match check(&value) {
            Ok(()) => Ok(Self(value)),
            Err(reason) => Err(InvalidTraceParent { value, reason }),
        }
    }
}

impl From<TraceParent> for String {
    fn from(tp: TraceParent) -> Self {
        tp.0
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_the_spec_example() {
        let tp: TraceParent = VALID.parse().unwrap();
        assert_eq!(tp.parent_id(), "00f067aa0ba902b7");
        assert_eq!(tp.to_string(), VALID);
        let unsampled: TraceParent = VALID.replace("-01", "-00").parse().unwrap();
        assert!(!unsampled.is_sampled());
    }

    #[test]
    fn rejects_malformed_values() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        ] {
            assert!(bad.parse::<TraceParent>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn serde_validates() {
        let ok: TraceParent = serde_json::from_str(&format!("\"{VALID}\"")).unwrap();
        assert_eq!(ok.as_str(), VALID);
        assert!(serde_json::from_str::<TraceParent>("\"00-zz\"").is_err());
    }
}
