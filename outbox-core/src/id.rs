//! The outbox message id.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The id of one outbox message: a UUIDv7, assigned when the event is recorded.
///
/// It is the primary key of the outbox row, the CloudEvents `ce-id` and the
/// JetStream `Nats-Msg-Id`, so a message published twice within the stream's
/// duplicate window is stored once, and consumers can drop repeats by it.
/// UUIDv7 ids sort by creation time, which keeps the outbox table's primary-key
/// index append-mostly.
///
/// ```
/// use outbox_core::MessageId;
/// let a = MessageId::new();
/// let b = MessageId::new();
/// assert!(a < b, "ids created later sort later");
/// assert_eq!(a, a.to_string().parse().unwrap());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageId(Uuid);

impl MessageId {
    /// A new, time-ordered UUIDv7 id.
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }

    /// Wraps an existing UUID (e.g. read back from the outbox table).
    pub const fn from_uuid(uuid: Uuid) -> Self {
        Self(uuid)
    }

    /// The UUID inside.
    pub const fn as_uuid(&self) -> &Uuid {
        &self.0
    }
}

impl Default for MessageId {
    fn default() -> Self {
        Self::new()
    }
}

impl From<Uuid> for MessageId {
    fn from(uuid: Uuid) -> Self {
        Self(uuid)
    }
}

impl From<MessageId> for Uuid {
    fn from(id: MessageId) -> Self {
        id.0
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl FromStr for MessageId {
    type Err = uuid::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_v7_and_strictly_increasing() {
        let ids: Vec<MessageId> = (0..1000).map(|_| MessageId::new()).collect();
        assert!(ids.iter().all(|id| id.as_uuid().get_version_num() == 7));
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn display_is_hyphenated_lowercase() {
        let id: MessageId = "0190F5A2-7B3C-7D4E-8F00-112233445566".parse().unwrap();
        assert_eq!(id.to_string(), "0190f5a2-7b3c-7d4e-8f00-112233445566");
    }
}
