//! Errors of building the registry and of decoding with it.

use crate::naming::InvalidName;

/// The registry refused to start: two types claim one (name, version), or
/// an upcast chain is broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A hand-written impl has a name or subject that breaks the naming rules.
    #[error("{rust_type} has an invalid name or subject")]
    InvalidName {
        /// The Rust type.
        rust_type: &'static str,
        /// The rule it breaks.
        #[source]
        source: InvalidName,
    },
    /// A hand-written impl has version 0.
    #[error("{rust_type}: version of `{name}` must be at least 1")]
    ZeroVersion {
        /// The Rust type.
        rust_type: &'static str,
        /// The event name.
        name: &'static str,
    },
    /// Two Rust types claim the same (name, version).
    #[error("`{name}` v{version} is claimed by both {first} and {second}")]
    DuplicateEvent {
        /// The event name.
        name: &'static str,
        /// The version.
        version: u32,
        /// One of the types.
        first: &'static str,
        /// The other.
        second: &'static str,
    },
    /// A type upcasts from an event with another name.
    #[error("{event} upcasts from {source_event}, an event with another name")]
    UpcastNameMismatch {
        /// The upcasting event.
        event: String,
        /// Its source.
        source_event: String,
    },
    /// Upcasts lead back to where they started.
    #[error("upcast cycle: {}", chain.join(" -> "))]
    UpcastCycle {
        /// The events on the cycle, in upcast order.
        chain: Vec<String>,
    },
    /// A type upcasts from a version that is not the one just before it.
    #[error(
        "{event} upcasts from v{source_version}; an upcast must come from v{expected} \
         (each version from the one before it)"
    )]
    UpcastGap {
        /// The upcasting event.
        event: String,
        /// The version it upcasts from.
        source_version: u32,
        /// The version it should upcast from.
        expected: u32,
    },
    /// A registered version is not reachable from the newest one.
    #[error(
        "`{name}` v{version} ({rust_type}) is registered, but the upcast chain \
         from v{newest} stops at v{chain_end}; give v{next} an upcast_from"
    )]
    UnreachableVersion {
        /// The event name.
        name: &'static str,
        /// The unreachable version.
        version: u32,
        /// Its Rust type.
        rust_type: &'static str,
        /// The newest version.
        newest: u32,
        /// The oldest version the chain reaches.
        chain_end: u32,
        /// The version that needs an upcast.
        next: u32,
    },
}

/// A message could not be decoded into an event.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// No type is registered under this name.
    #[error("no event type is registered as `{name}` (message has v{version})")]
    UnknownEvent {
        /// The name on the message.
        name: String,
        /// The version on the message.
        version: u32,
    },
    /// The name is known, the version is not.
    #[error("`{name}` v{version} is not registered (known versions: {known:?})")]
    UnknownVersion {
        /// The name on the message.
        name: String,
        /// The version on the message.
        version: u32,
        /// The registered versions of that name.
        known: Vec<u32>,
    },
    /// The payload does not deserialize into the registered type.
    #[error("cannot decode `{name}` v{version} into {rust_type}")]
    Malformed {
        /// The name on the message.
        name: String,
        /// The version on the message.
        version: u32,
        /// The registered type.
        rust_type: &'static str,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
    /// The message's type has no upcast path to the requested type.
    #[error("`{name}` v{version} ({from}) cannot be converted into {to}")]
    NotConvertible {
        /// The name on the message.
        name: String,
        /// The version on the message.
        version: u32,
        /// The type the message decodes into.
        from: &'static str,
        /// The requested type.
        to: &'static str,
    },
}
