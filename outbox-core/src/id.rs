//! The outbox message id.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Declares a UUIDv7 newtype: `new()` (time-ordered), `from_uuid`,
/// `as_uuid`, conversions, `Display`/`FromStr` (hyphenated) and serde as the
/// bare UUID.
macro_rules! uuid_v7_newtype {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A new, time-ordered UUIDv7 value: later ones sort later.
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

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl From<Uuid> for $name {
            fn from(uuid: Uuid) -> Self {
                Self(uuid)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

uuid_v7_newtype! {
    /// The id of one outbox message: a UUIDv7, assigned when the event is recorded.
    ///
    /// It is the primary key of the outbox row, the CloudEvents `ce-id` and the
    /// JetStream `Nats-Msg-Id`, so a message published twice within the stream's
    /// duplicate window is stored once, and consumers can drop repeats by it.
    /// UUIDv7 ids sort by creation time, which keeps the outbox table's primary-key
    /// index append-mostly.
    ///
    /// ```
    /// use txoutbox_core::MessageId;
    /// let a = MessageId::new();
    /// let b = MessageId::new();
    /// assert!(a < b, "ids created later sort later");
    /// assert_eq!(a, a.to_string().parse().unwrap());
    /// ```
    MessageId
}

uuid_v7_newtype! {
    /// The fencing token of one claim: rows claimed together carry it until they
    /// are completed, failed, released or claimed again after the lease expired.
    /// Any operation with a token the row no longer carries changes nothing.
    LeaseToken
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
