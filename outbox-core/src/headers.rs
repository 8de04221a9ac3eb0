//! User headers carried in the envelope next to the reserved wire headers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wire::names::{is_reserved, not_carried};

/// Application headers of one message (`tenant-region: eu`, ...), published as
/// NATS headers beside the reserved ones of the [wire contract](crate::wire).
///
/// Names are printable ASCII without `:` or whitespace and may not take a
/// reserved name or prefix (`ce-*`, `Nats-*`, `content-type`, `traceparent`,
/// `tracestate`); values may not contain line breaks nor begin or end with
/// whitespace, so a header arrives as it was sent (a NATS client trims
/// values).
///
/// ```
/// use txoutbox_core::Headers;
/// let mut headers = Headers::new();
/// headers.insert("x-region", "eu").unwrap();
/// assert_eq!(headers.get("x-region"), Some("eu"));
/// assert!(headers.insert("ce-id", "spoofed").is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    try_from = "BTreeMap<String, String>",
    into = "BTreeMap<String, String>"
)]
pub struct Headers(BTreeMap<String, String>);

/// A header that cannot be carried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidHeader {
    /// The name is empty or has characters NATS headers do not allow.
    #[error("header name `{0}` must be non-empty printable ASCII without `:` or whitespace")]
    BadName(String),
    /// The name belongs to the wire contract.
    #[error("header name `{0}` is reserved by the outbox wire contract")]
    Reserved(String),
    /// The value contains a line break, or begins or ends with whitespace.
    #[error(
        "value of header `{0}` must not contain CR or LF nor begin or end with whitespace \
         (NATS would not carry it as it is)"
    )]
    BadValue(String),
}

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a header after checking its name and value.
    pub fn insert(
        &mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), InvalidHeader> {
        let (name, value) = (name.into(), value.into());
        check(&name, &value)?;
        self.0.insert(name, value);
        Ok(())
    }

    /// The value of `name`, if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// All headers, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// How many headers there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds every header of `other`, replacing same-named ones.
    pub fn extend(&mut self, other: &Headers) {
        self.0
            .extend(other.0.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

fn check(name: &str, value: &str) -> Result<(), InvalidHeader> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
        return Err(InvalidHeader::BadName(name.to_owned()));
    }
    if is_reserved(name) {
        return Err(InvalidHeader::Reserved(name.to_owned()));
    }
    if not_carried(value).is_some() {
        return Err(InvalidHeader::BadValue(name.to_owned()));
    }
    Ok(())
}

impl TryFrom<BTreeMap<String, String>> for Headers {
    type Error = InvalidHeader;

    fn try_from(map: BTreeMap<String, String>) -> Result<Self, Self::Error> {
        map.iter().try_for_each(|(k, v)| check(k, v))?;
        Ok(Self(map))
    }
}

impl From<Headers> for BTreeMap<String, String> {
    fn from(headers: Headers) -> Self {
        headers.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_reserved_and_malformed_names() {
        let mut h = Headers::new();
        for reserved in [
            "ce-id",
            "CE-Type",
            "Nats-Msg-Id",
            "nats-expected-stream",
            "Content-Type",
            "traceparent",
        ] {
            assert_eq!(
                h.insert(reserved, "x"),
                Err(InvalidHeader::Reserved(reserved.to_owned()))
            );
        }
        for bad in ["", "a b", "a:b", "é"] {
            assert_eq!(
                h.insert(bad, "x"),
                Err(InvalidHeader::BadName(bad.to_owned()))
            );
        }
        for bad in ["a\nb", "a\rb", " eu", "eu\t", "eu\u{3000}"] {
            assert_eq!(
                h.insert("x", bad),
                Err(InvalidHeader::BadValue("x".into())),
                "{bad:?}"
            );
        }
        assert!(h.is_empty());
        assert!(h.insert("x", "e u").is_ok());
    }

    #[test]
    fn deserializing_validates() {
        assert!(serde_json::from_str::<Headers>(r#"{"x-a":"1"}"#).is_ok());
        assert!(serde_json::from_str::<Headers>(r#"{"ce-id":"1"}"#).is_err());
    }
}
