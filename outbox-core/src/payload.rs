//! The serialized event carried by a message.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// An event serialized as JSON, kept as serde wrote it. (A PostgreSQL
/// outbox stores payloads as `jsonb`, so a message read back from it carries
/// the equal JSON in PostgreSQL's normalized form: keys reordered, spaces
/// added.)
///
/// ```
/// use txoutbox_core::Payload;
/// let payload = Payload::from_json(r#"{"order_id":7}"#.to_owned())?;
/// assert_eq!(payload.as_bytes(), br#"{"order_id":7}"#);
/// assert!(Payload::from_json("not json".to_owned()).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Payload(Box<RawValue>);

impl Payload {
    /// Checks that `json` is one JSON value and keeps it as it is (e.g. when
    /// reading a row back from the outbox table).
    pub fn from_json(json: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(json).map(Self)
    }

    pub(crate) fn from_raw(raw: Box<RawValue>) -> Self {
        Self(raw)
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The JSON text as bytes, as published.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.get().as_bytes()
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    /// Whether the JSON text is empty (never true for a valid payload).
    pub fn is_empty(&self) -> bool {
        self.0.get().is_empty()
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Payload {}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
