//! The transactional outbox for Rust: SeaORM on the write side, NATS
//! JetStream on the wire. This is the one crate a service depends on; its
//! features choose the database and the broker.
//!
//! A service that changes its database and then publishes an event either
//! **loses the event** (it crashes after the commit, or the broker is down)
//! or **publishes a ghost** (it publishes, then the transaction rolls back).
//! With an outbox, events are written to an outbox table **in the same
//! transaction** as the business change, and a processor publishes them
//! afterwards, at least once, with the message id as JetStream's
//! `Nats-Msg-Id` so repeats are dropped; consumers get typed events, and an
//! inbox makes their effects happen exactly once.
//!
//! ```toml
//! [dependencies]
//! txoutbox = { version = "0.1", features = ["postgres", "nats"] }
//!
//! [dev-dependencies]
//! txoutbox = { version = "0.1", features = ["testing"] }
//! ```
//!
//! # The everyday names
//!
//! | step | names |
//! |---|---|
//! | declare events and aggregates | [`IntegrationEvent`], [`AggregateRoot`], [`EventBuffer`], [`MessageContext`] (all with `derive`) |
//! | save state and events in one transaction | [`Outbox`], [`OutboxConfig`], [`UnitOfWork`], [`Repository`], [`create_schema`] (`postgres`, `mysql`, `sqlite`) |
//! | publish | [`Processor`] (from [`Outbox::processor`]), [`JetStreamPublisher`], [`StreamSpec`], [`NatsConnect`] (`nats`) |
//! | consume | [`Subscriber`], [`Delivery`], [`HandlerError`], [`Inbox`] for exactly-once effects, [`EventRegistry`] |
//! | errors | [`ErrorChain`] prints an error with its causes |
//!
//! Everything else lives in modules named by job: [`events`] (the envelope,
//! ids and parts), [`registry`] (decoding, upcasts), [`consumer`] (what a
//! handler is given and returns, and what an inbox tells a subscriber that
//! keeps order),
//! [`processor`], [`store`] and [`publisher`] (the processor and the traits
//! it runs on), [`wire`] (header names), [`sea_orm`], [`nats`],
//! [`testing`] and [`axum`] (the integrations, whole).
//!
//! # Example
//!
//! Domain code records events; saving an aggregate seals them into outbox
//! messages; a consumer decodes them back into the Rust type.
//!
//! ```standalone_crate
//! use txoutbox::events::{AggregateChanges, SubjectPrefix};
//! use txoutbox::{AggregateRoot, EventBuffer, EventRegistry, IntegrationEvent, MessageContext};
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
//! let mut order = Order { id: 7, events: EventBuffer::new() };
//! order.record(OrderPlaced { order_id: 7, total_cents: 1250 })?;
//!
//! // What `UnitOfWork::save` writes as outbox rows, in the same transaction:
//! let changes = AggregateChanges::of(&order, &MessageContext::new(), &SubjectPrefix::default());
//! assert_eq!(changes.messages[0].subject, "events.order.placed");
//!
//! // A consumer gets the Rust type back.
//! let registry = EventRegistry::from_inventory()?;
//! let event: OrderPlaced = registry.decode_message(&changes.messages[0])?;
//! assert_eq!(event, OrderPlaced { order_id: 7, total_cents: 1250 });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The whole path, from the tables to a typed consumer, is the project's
//! `add_to_service` example; the repository's README shows it in an axum
//! service (the crate `examples/readme-service`); the
//! [`guide`] goes through every part of it, chapter by chapter.
//!
//! # The derives
//!
//! `#[derive(IntegrationEvent)]` and `#[derive(AggregateRoot)]` generate
//! code that names this crate (`::txoutbox`). A crate that re-exports it
//! under another path says so with `#[event(crate = "my_crate::txoutbox")]`
//! (or `#[aggregate(crate = "...")]`).
//!
//! # Feature flags
//!
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]
// The front page links to items behind features; they resolve where the docs
// are read (docs.rs builds with every feature), not in a build without them.
#![cfg_attr(
    not(all(
        feature = "processor",
        feature = "sea-orm",
        feature = "nats",
        feature = "testing",
        feature = "axum",
        feature = "console",
        feature = "opentelemetry",
        feature = "schema"
    )),
    allow(rustdoc::broken_intra_doc_links)
)]

pub use txoutbox_core::{
    AggregateRoot, Delivery, ErrorChain, EventBuffer, EventRegistry, HandlerError,
    IntegrationEvent, MessageContext,
};

#[cfg(feature = "processor")]
#[cfg_attr(docsrs, doc(cfg(feature = "processor")))]
pub use txoutbox_core::Processor;

#[cfg(feature = "sea-orm")]
#[cfg_attr(docsrs, doc(cfg(feature = "sea-orm")))]
pub use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, Repository, UnitOfWork, create_schema};

#[cfg(any(feature = "nats", feature = "nats-aws-lc-rs"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "nats", feature = "nats-aws-lc-rs"))))]
pub use txoutbox_nats::{JetStreamPublisher, NatsConnect, StreamSpec, Subscriber};

/// The event model: the envelope written as one outbox row and published
/// as one message, its ids and parts, what recording an event can fail
/// with. The registry's own types are in [`registry`].
pub mod events {
    pub use txoutbox_core::{
        AggregateChanges, AggregateRef, DecodeError, EventSubject, Headers, InvalidHeader,
        InvalidTraceParent, MessageId, OutboxMessage, Payload, PendingMessage, RecordError,
        STANDALONE, SubjectPrefix, TraceParent,
    };
}

#[cfg(feature = "processor")]
#[cfg_attr(docsrs, doc(cfg(feature = "processor")))]
pub use txoutbox_core::processor;
#[cfg(feature = "schema")]
#[cfg_attr(docsrs, doc(cfg(feature = "schema")))]
pub use txoutbox_core::schema;
pub use txoutbox_core::{
    backoff, consumer, naming, partition, publisher, redact, registry, store, verify, wire,
};

/// The SeaORM side, whole: the unit of work, the outbox store for
/// PostgreSQL, MySQL/MariaDB and SQLite, wake-ups, the inbox, migrations.
#[cfg(feature = "sea-orm")]
#[cfg_attr(docsrs, doc(cfg(feature = "sea-orm")))]
pub use txoutbox_sea_orm as sea_orm;

/// The NATS side, whole: the JetStream publisher, stream provisioning,
/// connections, typed subscribers and their dead letters.
#[cfg(any(feature = "nats", feature = "nats-aws-lc-rs"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "nats", feature = "nats-aws-lc-rs"))))]
pub use txoutbox_nats as nats;

/// The axum runtime, whole: a `Runtime` that owns the processor and the
/// subscribers, their health and metrics routes, and their ordered
/// shutdown after the server's.
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use txoutbox_axum as axum;

/// The web console, whole: `Console::builder(outbox)` and its `router()`,
/// to nest where the application wants it.
#[cfg(feature = "console")]
#[cfg_attr(docsrs, doc(cfg(feature = "console")))]
pub use txoutbox_console as console;

/// The testing kit, whole: an in-memory store and broker by the real
/// contracts, `drain()` on the real processor, a test clock, fault
/// injection, the store contract suite.
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub use txoutbox_testing as testing;

pub use txoutbox_core::{chrono, uuid};

/// What a service's files need, in one import: the everyday names of the
/// features it turned on, the error recording an event can fail with,
/// the migrator (with the trait its `up` comes from) and the axum
/// runtime.
///
/// ```
/// use txoutbox::prelude::*;
///
/// #[derive(serde::Serialize, serde::Deserialize, IntegrationEvent)]
/// #[event(name = "order.placed")]
/// struct OrderPlaced { order_id: u64 }
///
/// #[derive(AggregateRoot)]
/// #[aggregate(type = "order")]
/// struct Order { #[aggregate(id)] id: u64, events: EventBuffer }
///
/// impl Order {
///     fn place(id: u64) -> Result<Self, RecordError> {
///         let mut order = Order { id, events: EventBuffer::new() };
///         order.record(OrderPlaced { order_id: id })?;
///         Ok(order)
///     }
/// }
/// # assert_eq!(Order::place(7).unwrap().events.pending().len(), 1);
/// ```
pub mod prelude {
    pub use crate::events::RecordError;
    pub use txoutbox_core::{
        AggregateRoot, Delivery, EventBuffer, HandlerError, IntegrationEvent, MessageContext,
    };

    #[cfg(feature = "processor")]
    pub use txoutbox_core::Processor;

    #[cfg(feature = "sea-orm")]
    pub use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, Repository, UnitOfWork};

    #[cfg(feature = "migration")]
    pub use txoutbox_sea_orm::migration::{MigratorTrait as _, OutboxMigrator};

    #[cfg(any(feature = "nats", feature = "nats-aws-lc-rs"))]
    pub use txoutbox_nats::{JetStreamPublisher, NatsConnect, StreamSpec, Subscriber};

    #[cfg(feature = "axum")]
    pub use txoutbox_axum::{HttpError, Runtime};
}

/// Re-exports used by the code `#[derive(IntegrationEvent)]` and
/// `#[derive(AggregateRoot)]` generate, so a service needs no dependency on
/// the crates behind them. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use txoutbox_core::__private::*;
    #[cfg(feature = "sea-orm")]
    pub use txoutbox_sea_orm::__private::*;
}

pub mod guide;

/// The workspace's README, whose examples run as doctests so they cannot
/// rot (the guide's chapters are doctests where they are, in [`guide`]).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct WorkspaceReadmeDoctests;

/// This crate's README (crates.io's page), whose examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The testing kit's README (`txoutbox-testing`'s crates.io page), whose
/// examples use the kit through this facade, as a service does.
#[cfg(doctest)]
#[doc = include_str!("../../outbox-testing/README.md")]
pub struct TestingReadmeDoctests;
