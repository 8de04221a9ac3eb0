//! What the derive registers for each event type.

use std::any::{Any, TypeId};
use std::fmt;

use crate::subject::EventSubject;

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
    schema: fn() -> Option<serde_json::Value>,
}

/// The schema of a registration that has none.
fn no_schema() -> Option<serde_json::Value> {
    None
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
    /// A registration from its parts (the typed constructors are in
    /// `typed.rs`, beside the trait they read).
    pub(crate) const fn from_parts(
        name: &'static str,
        version: u32,
        subject: EventSubject,
        type_id: fn() -> TypeId,
        rust_type: fn() -> &'static str,
        decode: fn(&[u8]) -> Result<ErasedEvent, serde_json::Error>,
    ) -> Self {
        Self {
            name,
            version,
            subject,
            type_id,
            rust_type,
            decode,
            upcast: None,
            schema: no_schema,
        }
    }

    /// This registration, upcasting from the previous version.
    pub(crate) const fn with_upcast(mut self, upcast: Upcast) -> Self {
        self.upcast = Some(upcast);
        self
    }

    /// This registration, with `schema` as the JSON Schema of its payload
    /// (what [`schema`](Self::schema) returns). `#[derive(IntegrationEvent)]`
    /// sets it when the type implements `schemars::JsonSchema` and
    /// `outbox-core`'s feature `schema` is on; a hand-written impl passes
    /// `txoutbox_core::schema::json_schema::<Self>`.
    #[must_use]
    pub const fn with_schema(mut self, schema: fn() -> Option<serde_json::Value>) -> Self {
        self.schema = schema;
        self
    }

    /// The JSON Schema of the event's payload, if the registration has one
    /// (see [`with_schema`](Self::with_schema)): what a schema lock
    /// (`txoutbox_core::schema`, feature `schema`) records per (name, version).
    pub fn schema(&self) -> Option<serde_json::Value> {
        (self.schema)()
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
