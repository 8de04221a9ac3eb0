//! Where an event is published: [`EventSubject`] and [`SubjectPrefix`].

use std::fmt;

use crate::naming::{InvalidName, validate_prefix};

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
