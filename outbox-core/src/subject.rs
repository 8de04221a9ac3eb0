//! Where an event is published: [`EventSubject`] and [`SubjectPrefix`].

use std::fmt;

use crate::naming::{InvalidName, validate_prefix};
use crate::partition::Partitions;

/// How an event type chooses its NATS subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventSubject {
    /// `<prefix>.<event name>`, with the prefix configured where messages are
    /// written (the [`SubjectPrefix`], `events` by default); under a
    /// partitioned prefix ([`SubjectPrefix::with_partitions`]),
    /// `<prefix>.p<k>.<event name>` with `k` the aggregate's partition.
    Derived,
    /// Exactly this subject, whatever the prefix
    /// (`#[event(subject = "...")]`). Never partitioned: consumers of a
    /// fixed subject read it whole.
    Fixed(&'static str),
}

impl EventSubject {
    /// The subject for an event called `name`, under `prefix`, ignoring
    /// the prefix's partitions (see [`resolve_for`](Self::resolve_for)).
    ///
    /// ```
    /// use txoutbox_core::{EventSubject, SubjectPrefix};
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

    /// The subject for an event called `name` of the aggregate
    /// `aggregate_type` `aggregate_id`, under `prefix`: with the aggregate's
    /// partition token when the prefix is partitioned and the subject
    /// derived.
    ///
    /// ```
    /// use txoutbox_core::{EventSubject, Partitions, SubjectPrefix};
    /// let prefix = SubjectPrefix::new("shop")?.with_partitions(Partitions::new(16)?);
    /// assert_eq!(
    ///     EventSubject::Derived.resolve_for(&prefix, "order", "42", "order.placed"),
    ///     "shop.p2.order.placed"
    /// );
    /// assert_eq!(
    ///     EventSubject::Fixed("legacy.orders").resolve_for(&prefix, "order", "42", "order.placed"),
    ///     "legacy.orders"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve_for(
        &self,
        prefix: &SubjectPrefix,
        aggregate_type: &str,
        aggregate_id: &str,
        name: &str,
    ) -> String {
        match (self, prefix.partitions) {
            (EventSubject::Derived, Some(partitions)) => Partitions::subject(
                prefix.as_str(),
                partitions.of(aggregate_type, aggregate_id),
                name,
            ),
            _ => self.resolve(prefix, name),
        }
    }
}

/// The first tokens of every derived subject, `events` by default; a service
/// configures it once where it writes messages, so all its events land under,
/// say, `orders.>` and one JetStream stream can capture them.
///
/// ```
/// use txoutbox_core::SubjectPrefix;
/// assert_eq!(SubjectPrefix::default().as_str(), "events");
/// assert!(SubjectPrefix::new("acme.orders").is_ok());
/// assert!(SubjectPrefix::new("acme.*").is_err());
/// ```
///
/// It may also split derived subjects into partitions by aggregate
/// ([`with_partitions`](Self::with_partitions)), for consumers on several
/// processes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubjectPrefix {
    prefix: String,
    partitions: Option<Partitions>,
}

impl SubjectPrefix {
    /// The default prefix.
    pub const DEFAULT: &'static str = "events";

    /// A prefix, validated like a subject (no wildcards, no empty tokens).
    pub fn new(prefix: impl Into<String>) -> Result<Self, InvalidName> {
        let prefix = prefix.into();
        validate_prefix(&prefix)?;
        Ok(Self {
            prefix,
            partitions: None,
        })
    }

    /// Splits derived subjects into `partitions` by aggregate: an event of
    /// partition `k` goes to `<prefix>.p<k>.<event name>` (see
    /// [`Partitions`] for the function); fixed subjects stay as they are.
    ///
    /// ```
    /// use txoutbox_core::{Partitions, SubjectPrefix};
    /// let prefix = SubjectPrefix::default().with_partitions(Partitions::new(4)?);
    /// assert_eq!(prefix.partitions().map(Partitions::count), Some(4));
    /// assert_eq!(prefix.as_str(), "events");
    /// # Ok::<(), txoutbox_core::partition::PartitionsError>(())
    /// ```
    #[must_use]
    pub fn with_partitions(mut self, partitions: Partitions) -> Self {
        self.partitions = Some(partitions);
        self
    }

    /// The partitions derived subjects are split into, if any.
    pub fn partitions(&self) -> Option<Partitions> {
        self.partitions
    }

    /// The prefix as text.
    pub fn as_str(&self) -> &str {
        &self.prefix
    }
}

impl Default for SubjectPrefix {
    fn default() -> Self {
        Self {
            prefix: Self::DEFAULT.to_owned(),
            partitions: None,
        }
    }
}

impl fmt::Display for SubjectPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.prefix)
    }
}
