//! A decoded event of a type known at run time.

use std::any::Any;

use super::EventRegistry;
use super::error::DecodeError;
use super::registration::{ErasedEvent, EventRegistration};
use crate::event::IntegrationEvent;

/// An event decoded by [`EventRegistry::decode`]: the value, type-erased, and
/// the registration it was decoded with. Dispatch code turns it into the type
/// a handler wants with [`into_event`](DecodedEvent::into_event), which
/// applies the declared upcasts.
pub struct DecodedEvent<'r> {
    pub(super) registry: &'r EventRegistry,
    pub(super) registration: EventRegistration,
    pub(super) value: ErasedEvent,
}

impl DecodedEvent<'_> {
    /// The registration of the type the message was decoded into.
    pub fn registration(&self) -> &EventRegistration {
        &self.registration
    }

    /// The decoded value, to inspect with `downcast_ref`.
    pub fn value(&self) -> &(dyn Any + Send) {
        self.value.as_ref()
    }

    /// The decoded value converted into `E`, through upcasts if `E` is a newer
    /// version of the message's event.
    pub fn into_event<E: IntegrationEvent>(self) -> Result<E, DecodeError> {
        let not_convertible = || DecodeError::NotConvertible {
            name: self.registration.name().to_owned(),
            version: self.registration.version(),
            from: self.registration.rust_type(),
            to: std::any::type_name::<E>(),
        };
        let steps = self
            .registry
            .upcast_steps(&E::REGISTRATION, &self.registration)
            .ok_or_else(not_convertible)?;
        let mut value = self.value;
        for convert in steps {
            value = convert(value).ok_or_else(not_convertible)?;
        }
        value
            .downcast::<E>()
            .map(|event| *event)
            .map_err(|_| not_convertible())
    }
}

impl std::fmt::Debug for DecodedEvent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodedEvent")
            .field("registration", &self.registration)
            .finish_non_exhaustive()
    }
}
