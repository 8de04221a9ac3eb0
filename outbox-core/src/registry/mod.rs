//! The typed event registry: from `(name, version, bytes)` back to Rust types.
//!
//! # Registering event types
//!
//! `#[derive(IntegrationEvent)]` submits each type's [`EventRegistration`]
//! through [`inventory`](https://docs.rs/inventory), and
//! [`EventRegistry::from_inventory`] collects every registration linked into
//! the program.
//!
//! **The linker pitfall.** A library crate whose items the program never
//! names may be left out by the linker, and its registrations with it: the
//! registry then lacks types that are plainly in the source. Name the types
//! you consume: [`EventRegistryBuilder::register`] adds a type (and the
//! versions it upcasts from) whether or not the linker kept its inventory
//! entry, and naming it keeps its crate linked. (Typed subscribers are meant
//! to register their handlers' types this way, so a consumer that handles a
//! type can always decode it.)
//!
//! **Doctests.** Edition 2024 merges doctests into one binary, so every
//! example's event types share one inventory; a doctest that reads the
//! inventory should be marked `standalone_crate`.
//!
//! ```standalone_crate
//! use txoutbox_core::{EventRegistry, IntegrationEvent};
//! # use serde::{Deserialize, Serialize};
//! #[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
//! #[event(name = "order.placed")]
//! struct OrderPlaced { order_id: u64 }
//!
//! let registry = EventRegistry::builder()
//!     .with_inventory()              // everything the derive registered
//!     .register::<OrderPlaced>()     // and, whatever the linker did, this one
//!     .build()?;
//! let event: OrderPlaced = registry.decode_as("order.placed", 1, br#"{"order_id":7}"#)?;
//! assert_eq!(event, OrderPlaced { order_id: 7 });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod decoded;
mod error;
pub(crate) mod registration;
mod typed;
mod validate;

use std::any::TypeId;
use std::collections::{BTreeMap, HashMap};

pub use decoded::DecodedEvent;
pub use error::{DecodeError, RegistryError};
use registration::UpcastFn;
pub use registration::{ErasedEvent, EventRegistration};

use crate::event::IntegrationEvent;
use crate::message::OutboxMessage;

/// Every known event type, validated once at start-up, keyed by wire name and
/// version. Cheap to share behind an `Arc`; it never changes after
/// [`build`](EventRegistryBuilder::build).
pub struct EventRegistry {
    registrations: Vec<EventRegistration>,
    by_name: HashMap<&'static str, BTreeMap<u32, EventRegistration>>,
    by_type: HashMap<TypeId, EventRegistration>,
}

/// Collects registrations for an [`EventRegistry`].
#[derive(Default)]
pub struct EventRegistryBuilder {
    registrations: Vec<EventRegistration>,
}

impl EventRegistryBuilder {
    /// Adds every registration submitted by `#[derive(IntegrationEvent)]` in
    /// the crates linked into this program.
    pub fn with_inventory(self) -> Self {
        inventory::iter::<EventRegistration>
            .into_iter()
            .fold(self, |builder, registration| {
                builder.register_registration(*registration)
            })
    }

    /// Adds `E` and every older version it upcasts from.
    pub fn register<E: IntegrationEvent>(self) -> Self {
        self.register_registration(E::REGISTRATION)
    }

    /// Adds a registration and every older version it upcasts from.
    pub fn register_registration(mut self, registration: EventRegistration) -> Self {
        let mut next = Some(registration);
        // Bounded so a (rejected later) upcast cycle cannot loop here.
        for _ in 0..=u16::MAX {
            let Some(current) = next else { break };
            next = current.upcasts_from();
            self.registrations.push(current);
        }
        self
    }

    /// Validates the registrations and builds the registry: every name and
    /// subject valid, no (name, version) claimed by two types, every upcast
    /// chain complete and free of gaps and cycles.
    pub fn build(self) -> Result<EventRegistry, RegistryError> {
        let mut by_type: HashMap<TypeId, EventRegistration> = HashMap::new();
        let mut registrations = Vec::new();
        for registration in self.registrations {
            if by_type
                .insert(registration.type_id(), registration)
                .is_none()
            {
                registrations.push(registration);
            }
        }
        registrations.sort_by(|a, b| {
            (a.name(), a.version(), a.rust_type()).cmp(&(b.name(), b.version(), b.rust_type()))
        });
        validate::validate(&registrations)?;
        let mut by_name: HashMap<&'static str, BTreeMap<u32, EventRegistration>> = HashMap::new();
        for registration in &registrations {
            by_name
                .entry(registration.name())
                .or_default()
                .insert(registration.version(), *registration);
        }
        tracing::debug!(events = registrations.len(), "event registry built");
        Ok(EventRegistry {
            registrations,
            by_name,
            by_type,
        })
    }
}

impl EventRegistry {
    /// A builder, empty.
    pub fn builder() -> EventRegistryBuilder {
        EventRegistryBuilder::default()
    }

    /// The registry of every event type the derive registered in the crates
    /// linked into this program (see the linker pitfall above).
    pub fn from_inventory() -> Result<Self, RegistryError> {
        Self::builder().with_inventory().build()
    }

    /// All registrations, sorted by name, then version.
    pub fn iter(&self) -> impl Iterator<Item = &EventRegistration> {
        self.registrations.iter()
    }

    /// How many event types are registered.
    pub fn len(&self) -> usize {
        self.registrations.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.registrations.is_empty()
    }

    /// The registration for a wire name and version.
    pub fn get(&self, name: &str, version: u32) -> Option<&EventRegistration> {
        self.by_name.get(name)?.get(&version)
    }

    /// Whether `E` is registered.
    pub fn contains<E: IntegrationEvent>(&self) -> bool {
        self.by_type.contains_key(&TypeId::of::<E>())
    }

    /// The registered versions of `name`, ascending.
    pub fn versions(&self, name: &str) -> Vec<u32> {
        self.by_name
            .get(name)
            .map(|versions| versions.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Whether a message `(name, version)` can be decoded into `E`, directly
    /// or through upcasts.
    pub fn accepts<E: IntegrationEvent>(&self, name: &str, version: u32) -> bool {
        self.get(name, version)
            .is_some_and(|source| self.upcast_steps(&E::REGISTRATION, source).is_some())
    }

    /// Decodes a payload into the type registered for `(name, version)`,
    /// whatever it is. Never panics, whatever the bytes.
    pub fn decode(
        &self,
        name: &str,
        version: u32,
        payload: &[u8],
    ) -> Result<DecodedEvent<'_>, DecodeError> {
        let Some(registration) = self.get(name, version) else {
            let known = self.versions(name);
            return Err(if known.is_empty() {
                DecodeError::UnknownEvent {
                    name: name.to_owned(),
                    version,
                }
            } else {
                DecodeError::UnknownVersion {
                    name: name.to_owned(),
                    version,
                    known,
                }
            });
        };
        let value = registration
            .decode(payload)
            .map_err(|source| DecodeError::Malformed {
                name: name.to_owned(),
                version,
                rust_type: registration.rust_type(),
                source,
            })?;
        Ok(DecodedEvent {
            registry: self,
            registration: *registration,
            value,
        })
    }

    /// Decodes a payload written as `(name, version)` into `E`, upcasting
    /// older versions of `E`'s event.
    pub fn decode_as<E: IntegrationEvent>(
        &self,
        name: &str,
        version: u32,
        payload: &[u8],
    ) -> Result<E, DecodeError> {
        self.decode(name, version, payload)?.into_event()
    }

    /// Decodes an outbox message's payload into `E`.
    pub fn decode_message<E: IntegrationEvent>(
        &self,
        message: &OutboxMessage,
    ) -> Result<E, DecodeError> {
        self.decode_as(
            &message.event_name,
            message.event_version,
            message.payload.as_bytes(),
        )
    }

    /// The conversions that turn a `source` value into a `target` value,
    /// oldest first; `None` when `source` is not on `target`'s upcast chain.
    pub(crate) fn upcast_steps(
        &self,
        target: &EventRegistration,
        source: &EventRegistration,
    ) -> Option<Vec<UpcastFn>> {
        let source_type = source.type_id();
        let mut steps = Vec::new();
        let mut current = *self.by_type.get(&target.type_id())?;
        // Chains were validated acyclic; the bound is a second guard.
        for _ in 0..=self.registrations.len() {
            if current.type_id() == source_type {
                steps.reverse();
                return Some(steps);
            }
            let upcast = current.upcast()?;
            steps.push(upcast.convert);
            current = *self.by_type.get(&(upcast.source)().type_id())?;
        }
        None
    }
}

impl std::fmt::Debug for EventRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.registrations.iter()).finish()
    }
}
