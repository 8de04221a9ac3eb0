//! The [`IntegrationEvent`] trait.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::registry::registration::EventRegistration;
use crate::subject::{EventSubject, SubjectPrefix};

/// An event that leaves the service: it has a stable wire name and version,
/// is published on a NATS subject, and is (de)serialized as JSON with serde.
///
/// Implement it with the derive, which also registers the type in the
/// [`EventRegistry`](crate::EventRegistry) so consumers can decode messages
/// back into it:
///
/// ```
/// use txoutbox_core::IntegrationEvent;
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

    /// The subject this event is published on, under `prefix` (without a
    /// partition token: a partitioned prefix's subjects depend on the
    /// aggregate, see [`EventSubject::resolve_for`]).
    fn subject(prefix: &SubjectPrefix) -> String {
        Self::SUBJECT.resolve(prefix, Self::NAME)
    }
}
