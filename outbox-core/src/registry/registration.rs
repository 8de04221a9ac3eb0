//! What the derive registers for each event type.

use std::any::{Any, TypeId};
use std::fmt;

use crate::event::{EventSubject, IntegrationEvent};

/// A decoded event whose type is known only at run time.
pub type ErasedEvent = Box<dyn Any + Send>;

/// How the registry recognises, decodes and upcasts one event type.
///
/// `#[derive(IntegrationEvent)]` builds one and submits it through
/// `inventory`, so [`EventRegistry::from_inventory`](crate::EventRegistry::from_inventory)
/// finds every event type linked into the program. Everything in it is a
/// constant, so it can be built in a `const`.
#[derive(Clone, Copy)]
pub struct EventRegistration {
    name: &'static str,
    version: u32,
    subject: EventSubject,
    type_id: fn() -> TypeId,
    rust_type: fn() -> &'static str,
    decode: fn(&[u8]) -> Result<ErasedEvent, serde_json::Error>,
    upcast: Option<Upcast>,
}

/// Converts a decoded previous version into the next one.
pub(crate) type UpcastFn = fn(ErasedEvent) -> Option<ErasedEvent>;

/// The declared conversion from the previous version of an event.
#[derive(Clone, Copy)]
pub(crate) struct Upcast {
    pub(crate) source: fn() -> EventRegistration,
    pub(crate) convert: UpcastFn,
}

impl EventRegistration {
    /// The registration of `E`, with no upcast.
    pub const fn of<E: IntegrationEvent>() -> Self {
        Self {
            name: E::NAME,
            version: E::VERSION,
            subject: E::SUBJECT,
            type_id: TypeId::of::<E>,
            rust_type: std::any::type_name::<E>,
            decode: decode_erased::<E>,
            upcast: None,
        }
    }

    /// The registration of `E`, which is the next version of `Old` and is
    /// built from it with `From<Old>`: a consumer of `E` then also receives
    /// messages written as `Old` (and, through `Old`'s own upcast, older ones).
    ///
    /// ```
    /// use outbox_core::{EventRegistration, EventRegistry, IntegrationEvent};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct PlacedV1 { total: u64 }
    /// impl IntegrationEvent for PlacedV1 {
    ///     const NAME: &'static str = "order.placed";
    ///     const VERSION: u32 = 1;
    /// }
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Placed { total_cents: u64, currency: String }
    /// impl From<PlacedV1> for Placed {
    ///     fn from(v1: PlacedV1) -> Self { Placed { total_cents: v1.total * 100, currency: "EUR".into() } }
    /// }
    /// impl IntegrationEvent for Placed {
    ///     const NAME: &'static str = "order.placed";
    ///     const VERSION: u32 = 2;
    ///     const REGISTRATION: EventRegistration = EventRegistration::of_upcasting::<Self, PlacedV1>();
    /// }
    ///
    /// let registry = EventRegistry::builder().register::<Placed>().build()?;
    /// let placed: Placed = registry.decode_as("order.placed", 1, br#"{"total":3}"#)?;
    /// assert_eq!(placed.total_cents, 300);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const fn of_upcasting<E, Old>() -> Self
    where
        E: IntegrationEvent + From<Old>,
        Old: IntegrationEvent,
    {
        let mut registration = Self::of::<E>();
        registration.upcast = Some(Upcast {
            source: registration_of::<Old>,
            convert: upcast_erased::<Old, E>,
        });
        registration
    }

    /// The event's wire name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The event's version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// How the event chooses its subject.
    pub fn subject(&self) -> EventSubject {
        self.subject
    }

    /// The Rust type's [`TypeId`].
    pub fn type_id(&self) -> TypeId {
        (self.type_id)()
    }

    /// The Rust type's name, for diagnostics.
    pub fn rust_type(&self) -> &'static str {
        (self.rust_type)()
    }

    /// The registration of the previous version this one upcasts from.
    pub fn upcasts_from(&self) -> Option<EventRegistration> {
        self.upcast.map(|upcast| (upcast.source)())
    }

    pub(crate) fn upcast(&self) -> Option<Upcast> {
        self.upcast
    }

    pub(crate) fn decode(&self, bytes: &[u8]) -> Result<ErasedEvent, serde_json::Error> {
        (self.decode)(bytes)
    }

    /// `Type (name vN)`, for error messages.
    pub(crate) fn describe(&self) -> String {
        format!("{} ({} v{})", self.rust_type(), self.name, self.version)
    }
}

impl fmt::Debug for EventRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventRegistration")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("subject", &self.subject)
            .field("rust_type", &self.rust_type())
            .field(
                "upcasts_from",
                &self.upcasts_from().map(|source| source.rust_type()),
            )
            .finish()
    }
}

inventory::collect!(EventRegistration);

const fn registration_of<E: IntegrationEvent>() -> EventRegistration {
    E::REGISTRATION
}

fn decode_erased<E: IntegrationEvent>(bytes: &[u8]) -> Result<ErasedEvent, serde_json::Error> {
    serde_json::from_slice::<E>(bytes).map(|event| Box::new(event) as ErasedEvent)
}

fn upcast_erased<Old, New>(value: ErasedEvent) -> Option<ErasedEvent>
where
    Old: IntegrationEvent,
    New: IntegrationEvent + From<Old>,
{
    let old = value.downcast::<Old>().ok()?;
    Some(Box::new(New::from(*old)))
}
