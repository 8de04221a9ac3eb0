//! The [`IntegrationEvent`] trait and how an event's subject is chosen.

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::naming::{InvalidName, validate_prefix};
use crate::registry::EventRegistration;

/// An event that leaves the service: it has a stable wire name and version,
/// is published on a NATS subject, and is (de)serialized as JSON with serde.
///
/// Implement it with the derive, which also registers the type in the
/// [`EventRegistry`](crate::EventRegistry) so consumers can decode messages
/// back into it:
///
/// ```
/// use outbox_core::IntegrationEvent;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Serialize, Deserialize, IntegrationEvent)]
/// #[event(name = "order.placed")]
/// struct OrderPlaced {
///     order_id: u64,
/// }
///
/// assert_eq!(OrderPlaced::NAME, "order.placed");
/// assert_eq!(OrderPlaced::VERSION, 1);
/// assert_eq!(OrderPlaced::subject(&Default::default()), "events.order.placed");
/// ```
///
/// The name and version are the wire contract, not the Rust type's name:
/// renaming or moving the type changes nothing on the wire. A breaking change
/// to the payload is a new version (a new type with the same name and a higher
/// `version`), optionally with an upcast from the previous one (see
/// [`EventRegistration::of_upcasting`]).
///
/// Nothing here depends on a database or a broker.
pub trait IntegrationEvent: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The stable wire name, e.g. `order.placed`: dot-separated tokens of
    /// ASCII letters, digits, `_` and `-` (see [`crate::naming`]).
    const NAME: &'static str;

    /// The payload's schema version, starting at 1.
    const VERSION: u32;

    /// Where the event is published. [`EventSubject::Derived`] (the default)
    /// publishes on `<prefix>.<NAME>`.
    const SUBJECT: EventSubject = EventSubject::Derived;

    /// How the [`EventRegistry`](crate::EventRegistry) decodes this type,
    /// including the upcast from the previous version, if any. The derive
    /// fills it in; a hand-written impl rarely needs to override it.
    const REGISTRATION: EventRegistration = EventRegistration::of::<Self>();

    /// The subject this event is published on, under `prefix`.
    fn subject(prefix: &SubjectPrefix) -> String {
        Self::SUBJECT.resolve(prefix, Self::NAME)
    }
}

/// How an event type chooses its NATS subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventSubject {
    /// `<prefix>.<event name>`, with the prefix configured where messages are
    /// written (the [`SubjectPrefix`], `events` by default).
    Derived,
    /// Exactly this subject, whatever the prefix
    /// (`#[event(subject = "...")]`).
    Fixed(&'static str),
}

impl EventSubject {
    /// The subject for an event called `name`, under `prefix`.
    ///
    /// ```
    /// use outbox_core::{EventSubject, SubjectPrefix};
    /// let prefix = SubjectPrefix::new("shop").unwrap();
    /// assert_eq!(EventSubject::Derived.resolve(&prefix, "order.placed"), "shop.order.placed");
    /// assert_eq!(EventSubject::Fixed("legacy.orders").resolve(&prefix, "order.placed"), "legacy.orders");
    /// ```
    pub fn resolve(&self, prefix: &SubjectPrefix, name: &str) -> String {
        match self {
            EventSubject::Derived => format!("{}.{name}", prefix.as_str()),
            EventSubject::Fixed(subject) => (*subject).to_owned(),
        }
    }
}

/// The first tokens of every derived subject, `events` by default; a service
/// configures it once where it writes messages, so all its events land under,
/// say, `orders.>` and one JetStream stream can capture them.
///
/// ```
/// use outbox_core::SubjectPrefix;
/// assert_eq!(SubjectPrefix::default().as_str(), "events");
/// assert!(SubjectPrefix::new("acme.orders").is_ok());
/// assert!(SubjectPrefix::new("acme.*").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubjectPrefix(String);

impl SubjectPrefix {
    /// The default prefix.
    pub const DEFAULT: &'static str = "events";

    /// A prefix, validated like a subject (no wildcards, no empty tokens).
    pub fn new(prefix: impl Into<String>) -> Result<Self, InvalidName> {
        let prefix = prefix.into();
        validate_prefix(&prefix)?;
        Ok(Self(prefix))
    }

    /// The prefix as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for SubjectPrefix {
    fn default() -> Self {
        Self(Self::DEFAULT.to_owned())
    }
}

impl fmt::Display for SubjectPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
