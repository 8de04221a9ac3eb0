//! The registrations of Rust event types: [`EventRegistration::of`] and
//! [`EventRegistration::of_upcasting`], beside the trait whose constants
//! they read (the registration itself knows no trait, so the trait can
//! carry one).

use std::any::TypeId;

use super::registration::{ErasedEvent, EventRegistration, Upcast};
use crate::event::IntegrationEvent;

impl EventRegistration {
    /// The registration of `E`, with no upcast.
    pub const fn of<E: IntegrationEvent>() -> Self {
        Self::from_parts(
            E::NAME,
            E::VERSION,
            E::SUBJECT,
            TypeId::of::<E>,
            std::any::type_name::<E>,
            decode_erased::<E>,
        )
    }

    /// The registration of `E`, which is the next version of `Old` and is
    /// built from it with `From<Old>`: a consumer of `E` then also receives
    /// messages written as `Old` (and, through `Old`'s own upcast, older ones).
    ///
    /// ```
    /// use txoutbox_core::{EventRegistry, IntegrationEvent};
    /// use txoutbox_core::registry::EventRegistration;
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
        Self::of::<E>().with_upcast(Upcast {
            source: registration_of::<Old>,
            convert: upcast_erased::<Old, E>,
        })
    }
}

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
