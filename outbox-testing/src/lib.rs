//! A testing kit for services that use the transactional outbox.
//!
//! Add it as a dev-dependency and test a service's outbox with no database
//! and no broker:
//!
//! - [`MemoryStore`]: the outbox table in memory, by the same contract as
//!   the SQL stores (it passes the same [`contract`] suite as PostgreSQL,
//!   MariaDB and SQLite): per-aggregate order, leases, retries, dead
//!   messages, delays.
//! - [`MemoryPublisher`]: a broker in memory that deduplicates by message
//!   id; `events::<OrderPlaced>()` returns what was published, typed.
//! - `SqliteOutbox` (feature `sea-orm`; the facade's `testing` with
//!   `sea-orm`): **the production path**, the service's real
//!   `txoutbox_sea_orm::Outbox` (repository, unit of work, `transaction`)
//!   on SQLite in memory, over a [`MemoryPublisher`]; its `drain` runs the
//!   real processor. Test the very functions the service runs.
//! - `TestSubscriber` (feature `nats`; the facade's `testing` with
//!   `nats`): **the consumer's production path**, the service's real
//!   subscriber (the `SubscriberBuilder` its code builds: typed handlers,
//!   inbox, per-aggregate order, retries, dead letters, held aggregates and
//!   their release) driven in this process with the outbox's published
//!   messages, each delivery's outcome reported. No nats-server.
//! - [`TestOutbox`]: the store in memory and the publisher wired to the
//!   real processor, for code written against the store's contract; `drain().await`
//!   publishes everything publishable now and returns it; its
//!   [`TestClock`] jumps over backoffs and leases.
//! - [`recorded`]: the events an aggregate recorded and has not saved yet,
//!   typed, for domain tests.
//! - [`faults`]: wrap a publisher or a store to lose acks, delay them, make
//!   the broker unavailable for a window, reject given messages, fail
//!   completions or lose leases.
//! - [`counting`]: wrap a store to count and time the processor's calls.
//! - [`nats::NatsServer`] (feature `nats-server`): a private nats-server
//!   for integration tests, to kill, freeze and restart.
//! - Handlers are tested with a `Delivery` built in memory:
//!   `Delivery::new(message).with_delivery_count(2)` is a redelivery.
//!
//! Public dependencies: [`txoutbox_core`] (its types are this kit's API), and
//! with the feature `nats-server`, `async-nats` (`NatsServer::connect`
//! returns its `Client`): use the versions `txoutbox_core` and
//! `txoutbox_nats::async_nats` re-export.
//!
//! ```
//! # use txoutbox_core::{AggregateRoot, EventBuffer, IntegrationEvent, RetryPolicy};
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
//! # #[event(name = "doc.lib.order.placed")]
//! # struct OrderPlaced { order_id: u64 }
//! # #[derive(AggregateRoot)]
//! # #[aggregate(type = "order")]
//! # struct Order { #[aggregate(id)] id: u64, events: EventBuffer }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use txoutbox_testing::{TestOutbox, recorded};
//!
//! let mut order = Order { id: 7, events: EventBuffer::new() };
//! order.record(OrderPlaced { order_id: 7 })?;
//! assert_eq!(recorded::<OrderPlaced>(&order), [OrderPlaced { order_id: 7 }]);
//!
//! let outbox = TestOutbox::new();
//! outbox.save(&mut order)?;
//! let placed = outbox.drain_events::<OrderPlaced>().await?;
//! assert_eq!(placed[0].event, OrderPlaced { order_id: 7 });
//! assert_eq!(placed[0].message.aggregate_id, "7");
//! outbox.publisher().assert_in_order();
//! # Ok(()) }
//! ```
//!
//! # Feature flags
//!
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod clock;
pub mod contract;
pub mod counting;
pub mod faults;
mod harness;
mod memory_publisher;
mod memory_store;
#[cfg(feature = "nats-server")]
#[cfg_attr(docsrs, doc(cfg(feature = "nats-server")))]
pub mod nats;
#[cfg(feature = "nats-server")]
mod nats_cluster;
mod order;
mod recorded;
#[cfg(feature = "sea-orm")]
#[cfg_attr(docsrs, doc(cfg(feature = "sea-orm")))]
mod sqlite_outbox;
#[cfg(feature = "nats")]
#[cfg_attr(docsrs, doc(cfg(feature = "nats")))]
mod test_subscriber;
mod typed;

pub use clock::TestClock;
pub use harness::{DEFAULT_DRAIN_TIMEOUT, DrainError, TestOutbox};
pub use memory_publisher::MemoryPublisher;
pub use memory_store::{MemoryRow, MemoryStore, RowStatus, WriteError};
pub use order::OrderViolation;
pub use recorded::recorded;
#[cfg(feature = "sea-orm")]
pub use sqlite_outbox::SqliteOutbox;
#[cfg(feature = "nats")]
pub use test_subscriber::{
    DeliveryOutcome, RecordedDeadLetter, Settled, TestSubscriber, TestSubscriberError,
};
pub use typed::PublishedEvent;

// This crate's README (crates.io's page) shows the kit as a service uses
// it, through the facade (`txoutbox::testing`), which this crate cannot
// depend on: its examples run as doctests of the facade
// (`outbox/src/lib.rs`, `TestingReadmeDoctests`).
