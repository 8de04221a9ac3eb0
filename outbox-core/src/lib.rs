//! The core of the transactional outbox: domain events, the message envelope,
//! the typed event registry, and the processor engine that publishes
//! outbox rows (claim, publish, retry, backoff, dead letters). No database,
//! no broker: those come through the [`OutboxStore`] and [`Publisher`]
//! traits (`outbox-sea-orm`, `outbox-nats`).
//!
//! A service that changes its database and then publishes an event either
//! loses the event (a crash after the commit, the broker down) or publishes a
//! ghost (publish, then roll back). With an outbox, events are written to an
//! outbox table **in the same transaction** as the change, and a processor
//! publishes them afterwards, at least once, with a deduplication id.
//!
//! This crate holds the model the other crates share:
//!
//! - [`IntegrationEvent`] and `#[derive(IntegrationEvent)]`: an event's stable
//!   wire name, version and subject;
//! - [`AggregateRoot`], `#[derive(AggregateRoot)]` and [`EventBuffer`]:
//!   aggregates record events, domain code stays free of infrastructure;
//! - [`OutboxMessage`]: the envelope written as one outbox row and published
//!   as one NATS message ([`wire`] names its headers);
//! - [`EventRegistry`]: decodes `(name, version, bytes)` back into the
//!   registered Rust type, upcasting older versions.
//! - [`consumer`]: [`Delivery`] and [`HandlerError`], what a consumer's
//!   handler is given and how it fails (typed subscribers and the inbox
//!   share them), and what a consumer's inbox tells a subscriber that keeps
//!   per-aggregate order ([`consumer::AppliedMessages`],
//!   [`consumer::HeldMessages`]);
//! - [`processor`]: the [`Processor`] that claims, publishes, retries and
//!   dead-letters, on any [`OutboxStore`] ([`store`]) and [`Publisher`]
//!   ([`publisher`]); [`backoff`]: the jittered pauses it and the other
//!   crates retry with.
//!
//! Every public type lives in the module of its area (`consumer`,
//! `processor`, `publisher`, `registry`, `store`, `partition`, `wire`,
//! `naming`, `backoff`, `verify`); the ones a service names every day are
//! also at the root.
//!
//! # Example
//!
//! ```standalone_crate
//! use txoutbox_core::{
//!     AggregateChanges, AggregateRoot, EventBuffer, EventRegistry, IntegrationEvent,
//!     MessageContext, SubjectPrefix,
//! };
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
//! #[event(name = "order.placed")]
//! struct OrderPlaced { order_id: u64, total_cents: u64 }
//!
//! #[derive(AggregateRoot)]
//! #[aggregate(type = "order")]
//! struct Order { #[aggregate(id)] id: u64, events: EventBuffer }
//!
//! // Domain code records; nothing here knows about databases or NATS.
//! let mut order = Order { id: 7, events: EventBuffer::new() };
//! order.record(OrderPlaced { order_id: 7, total_cents: 1250 })?;
//!
//! // Saving (outbox-sea-orm) seals the events into outbox messages ...
//! let changes = AggregateChanges::of(&order, &MessageContext::new(), &SubjectPrefix::default());
//! let message = &changes.messages[0];
//! assert_eq!(message.subject, "events.order.placed");
//! assert_eq!((message.aggregate_id.as_str(), message.sequence), ("7", 1));
//!
//! // ... and a consumer decodes them back into the Rust type.
//! let registry = EventRegistry::from_inventory()?;
//! let event: OrderPlaced = registry.decode_message(message)?;
//! assert_eq!(event, OrderPlaced { order_id: 7, total_cents: 1250 });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Public dependencies
//!
//! Types of these crates appear in this crate's API; use the versions
//! re-exported here (or the same major version) when you name them:
//! [`chrono`] (`DateTime<Utc>` of envelopes, leases and stats),
//! [`uuid`] (the ids: `MessageId::as_uuid`), `serde_json` (payloads,
//! errors, schemas: depend on serde_json 1), `tokio_util` (the processor's
//! `CancellationToken`, re-exported as `txoutbox_core::tokio_util` with the
//! `processor` feature), `serde` (the derives' bounds), and with
//! the feature `schema`, `schemars` (`txoutbox_core::schema::schemars`).
//!
//! # Semver
//!
//! Errors, selector enums and the structs with public fields that may
//! grow are `#[non_exhaustive]`: match them with a wildcard arm, and build
//! the structs with their constructors (`RetryPolicy::new(..)` and
//! `with_*`, `LeaseOutcome::new`, `EventStats::new`, `PublishAck::new`, or
//! `Default` and field assignment). Errors give their cause through
//! `source()` and leave it out of their message: print the whole chain
//! with [`ErrorChain`] (or `anyhow`'s `{:#}`).
//!
//! # Feature flags
//!
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod aggregate;
pub mod backoff;
pub mod cleanup;
pub mod consumer;
mod context;
mod error_chain;
mod event;
mod headers;
mod id;
mod message;
pub mod naming;
#[cfg(feature = "opentelemetry")]
#[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
pub mod otel;
pub mod partition;
mod payload;
mod pending;
#[cfg(feature = "processor")]
#[cfg_attr(docsrs, doc(cfg(feature = "processor")))]
pub mod processor;
pub mod publisher;
pub mod redact;
pub mod registry;
#[cfg(feature = "schema")]
#[cfg_attr(docsrs, doc(cfg(feature = "schema")))]
pub mod schema;
mod schema_probe;
pub mod store;
mod subject;
mod trace;
pub mod verify;
pub mod wire;

pub use aggregate::{AggregateChanges, AggregateRoot, EventBuffer};
pub use consumer::{Delivery, HandlerError};
pub use context::MessageContext;
pub use error_chain::ErrorChain;
pub use event::IntegrationEvent;
pub use headers::{Headers, InvalidHeader};
pub use id::MessageId;
pub use message::{AggregateRef, OutboxMessage, STANDALONE};
pub use partition::Partitions;
pub use payload::Payload;
pub use pending::{PendingMessage, RecordError};
#[cfg(feature = "processor")]
pub use processor::{Processor, ProcessorHandle};
pub use publisher::{PublishError, Publisher};
pub use registry::{DecodeError, EventRegistry};
pub use store::{OutboxStore, RetryPolicy, StoreError};
pub use subject::{EventSubject, SubjectPrefix};
pub use trace::{InvalidTraceParent, TraceParent};

pub use chrono;
#[cfg(feature = "processor")]
#[cfg_attr(docsrs, doc(cfg(feature = "processor")))]
pub use tokio_util;
pub use uuid;

/// `#[derive(IntegrationEvent)]`: implements [`IntegrationEvent`] and
/// registers the type for the [`EventRegistry`].
///
/// ```
/// use txoutbox_core::IntegrationEvent;
/// # use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize, IntegrationEvent)]
/// #[event(name = "order.shipped", version = 2, subject = "logistics.shipments")]
/// struct OrderShipped { order_id: u64, carrier: String }
/// ```
///
/// Attributes, all inside one or more `#[event(...)]`:
///
/// | key | value | default |
/// |---|---|---|
/// | `name` | the wire name, e.g. `"order.placed"` | required: the wire contract must not follow a Rust rename |
/// | `version` | integer ≥ 1 | `1` |
/// | `subject` | a fixed NATS subject | `<prefix>.<name>` |
/// | `upcast_from` | the previous version's type; needs `From<Previous> for Self` | none |
/// | `crate` | path to `txoutbox_core` as a string, for re-exports | `"::txoutbox_core"` |
///
/// On an enum, the whole enum is **one** event type with one name and version;
/// serde decides how variants are written (e.g. `#[serde(tag = "kind")]`).
/// Events that need their own names, versions or subjects are separate
/// structs: a variant cannot be registered on its own, and giving each variant
/// its own wire identity would make adding a variant a breaking change to
/// every consumer of the enum.
///
/// Mistakes are compile errors pointing at the offending token: an unknown or
/// repeated key, a literal of the wrong type, version 0, an invalid name or
/// subject, a generic type, a union, a type that is not
/// `Serialize + DeserializeOwned`.
#[cfg(feature = "derive")]
#[cfg_attr(docsrs, doc(cfg(feature = "derive")))]
pub use txoutbox_macros::IntegrationEvent;

/// `#[derive(AggregateRoot)]`: implements [`AggregateRoot`] for a struct
/// with named fields, from its aggregate type, its id field and its
/// [`EventBuffer`] field.
///
/// ```
/// use txoutbox_core::{AggregateRoot, EventBuffer, IntegrationEvent};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize, IntegrationEvent)]
/// # #[event(name = "order.placed")]
/// # struct OrderPlaced { order_id: u64 }
///
/// #[derive(AggregateRoot)]
/// #[aggregate(type = "order")]
/// struct Order {
///     #[aggregate(id)]
///     id: u64,               // any `Display` type: the id is `id.to_string()`
///     total_cents: u64,
///     events: EventBuffer,   // found by its type
/// }
///
/// let mut order = Order { id: 7, total_cents: 1250, events: EventBuffer::new() };
/// order.record(OrderPlaced { order_id: 7 })?;
/// assert_eq!(Order::AGGREGATE_TYPE, "order");
/// assert_eq!(order.aggregate_id(), "7");
/// assert_eq!(order.events().pending().len(), 1);
/// # Ok::<(), txoutbox_core::RecordError>(())
/// ```
///
/// Attributes:
///
/// | attribute | on | meaning | default |
/// |---|---|---|---|
/// | `#[aggregate(type = "order")]` | the struct | [`AggregateRoot::AGGREGATE_TYPE`], stored on every message: not empty, at most 128 bytes, no control characters | required: it must not follow a Rust rename |
/// | `#[aggregate(crate = "my_crate::txoutbox_core")]` | the struct | path to `txoutbox_core` as a string, for re-exports | `"::txoutbox_core"` |
/// | `#[aggregate(id)]` | one field | the id; any type that implements `Display`, e.g. `String`, `u64`, `uuid::Uuid` or a newtype | required, unless one field is marked `#[sea_orm(primary_key)]` (a SeaORM model): that field is the id |
/// | `#[aggregate(events)]` | one field | the [`EventBuffer`] | the one field whose type is named `EventBuffer` |
/// | `#[aggregate(entity = "Entity", version_column = "Column::Version")]` | the struct | the struct is a SeaORM model that is its own aggregate: also implements `txoutbox_sea_orm::AggregateEntity` (`from_model` keeps the row and takes the buffer, `to_active_model` is `self.clone().into_active_model()`); needs a dependency on `outbox-sea-orm` and a `Clone` model | none: `AggregateEntity` is written by hand |
///
/// Struct attributes may be split over several `#[aggregate(...)]`. Generic
/// structs work; a generic id type gets a `Display` bound. A SeaORM model
/// can derive it too, its `#[sea_orm(ignore)]` buffer field found by type;
/// `txoutbox_sea_orm::AggregateEntity` shows one with `entity` and
/// `version_column`.
///
/// Mistakes are compile errors pointing at the offending token: a missing
/// `type`, id field or `EventBuffer` field; two id fields, or two unmarked
/// `EventBuffer` fields; an unknown or repeated key, or a key in the wrong
/// place; an empty or invalid `type`; `entity` without `version_column` or
/// the reverse; an id that is not `Display`; an enum, a tuple or unit
/// struct, a union.
#[cfg(feature = "derive")]
#[cfg_attr(docsrs, doc(cfg(feature = "derive")))]
pub use txoutbox_macros::AggregateRoot;

/// Re-exports used by code that `#[derive(IntegrationEvent)]` generates, so
/// user crates need no direct dependency on them. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::aggregate::{AggregateRoot, EventBuffer};
    pub use crate::event::IntegrationEvent;
    pub use crate::registry::EventRegistration;
    pub use crate::schema_probe::{HasSchema, NoSchema, SchemaProbe};
    pub use crate::subject::EventSubject;
    pub use core::fmt::Display;
    pub use inventory;
    pub use std::string::String;

    /// The payload schema's type (an alias, so diagnostics keep naming
    /// `serde_json` by its own path).
    pub type JsonValue = serde_json::Value;

    /// The aggregate id `#[derive(AggregateRoot)]` returns: the id field's
    /// `Display`, so a missing impl is reported against the field's type.
    pub fn display_id<T: Display + ?Sized>(id: &T) -> String {
        id.to_string()
    }

    /// `a == b`, usable in constants (the derive checks upcast names with it).
    pub const fn same_name(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }
}

/// This crate's README (crates.io's page), whose examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
