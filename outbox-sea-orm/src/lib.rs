//! SeaORM integration for the transactional outbox: an aggregate's state and
//! the events it recorded commit in **one** database transaction, or neither
//! does; then a processor publishes them.
//!
//! - [`Outbox`]: the handle a service keeps; begins [`UnitOfWork`]s, hands out
//!   [`Repository`]s, [joins](Outbox::join) transactions the application
//!   owns, and builds the processor.
//! - `wake` (module): commits reach this process's processor with no query,
//!   other processes by coalesced `NOTIFY` on PostgreSQL
//!   ([`CommitListener`], [`PgNotifications`]).
//! - [`AggregateEntity`]: maps an aggregate to a SeaORM entity with a version
//!   column (optimistic concurrency).
//! - [`SeaOrmOutboxStore`]: the [`OutboxStore`](txoutbox_core::OutboxStore) the
//!   processor claims from, on PostgreSQL, MySQL/MariaDB and SQLite, and the
//!   [`OutboxAdmin`](txoutbox_core::store::OutboxAdmin) an operator works
//!   with; [`admin`] holds what it shows an operator.
//! - [`Inbox`]: exactly-once effects for consumers: a handler's writes, the
//!   events it records and the "processed" mark commit in one transaction;
//!   repeats are recognised and skipped; old rows are purged in batches;
//!   handlers are plain `async fn`s; aggregates held behind a message their
//!   consumer could not apply are listed and released ([`Inbox::holds`],
//!   [`Inbox::release`]); [`inbox`] holds its handler types.
//! - [`migration`] (feature `migration`): the table as migrations;
//!   [`create_schema`] creates it directly.
//! - Feature `opentelemetry`: events saved inside a span carry the span's
//!   OpenTelemetry context as their `traceparent` and `tracestate` when the
//!   [`MessageContext`](txoutbox_core::MessageContext) sets none (through
//!   `outbox-core/opentelemetry`). The `tracestate` is stored in the
//!   `headers` JSON column under its reserved name: the schema is unchanged.
//!
//! Supported backends: PostgreSQL 12+, MariaDB 10.6+ / MySQL 8.0.1+ (for
//! `SKIP LOCKED`), SQLite 3.35+ (for `RETURNING`).
//!
//! # Public dependencies
//!
//! [`sea_orm`] (connections, transactions, entities, `DbErr` in
//! [`OutboxError`]) and [`txoutbox_core`] appear in this crate's API and are
//! re-exported: depend on the same SeaORM major version (2), or name it as
//! `txoutbox_sea_orm::sea_orm`. `chrono` and `uuid` come through
//! `txoutbox_core::{chrono, uuid}`.
//!
//! # Feature flags
//!
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod admin;
mod aggregate_entity;
mod autocommit;
mod availability;
mod config;
mod contention;
mod dialect;
mod error;
pub mod inbox;
#[cfg(feature = "migration")]
#[cfg_attr(docsrs, doc(cfg(feature = "migration")))]
pub mod migration;
mod outbox;
mod repository;
mod row;
mod schema;
mod schema_check;
mod shared;
mod store;
mod stored_row;
mod sync;
mod transaction;
mod unit_of_work;
mod wake;

pub use aggregate_entity::AggregateEntity;
pub use config::{OutboxConfig, Retention, TableName};
pub use error::OutboxError;
pub use inbox::Inbox;
pub use outbox::Outbox;
pub use repository::Repository;
pub use schema::create_schema;
pub use sea_orm;
pub use store::SeaOrmOutboxStore;
pub use transaction::{TRANSACTION_ATTEMPTS, TransactionRetry, TransactionUnit};
pub use txoutbox_core;
pub use txoutbox_core::STANDALONE;
pub use unit_of_work::{AfterCommit, Joined, PrimaryKeyOf, UnitOfWork};
pub use wake::{CommitEvent, CommitListener, PgNotifications};

/// Re-exports used by code that `#[derive(AggregateRoot)]` generates for
/// `#[aggregate(entity = ..., version_column = ...)]`, so user crates need
/// not name `sea_orm` paths the derive relies on. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::aggregate_entity::AggregateEntity;
    pub use sea_orm::{EntityTrait, IntoActiveModel};
}

/// What the fuzz targets (`fuzz/` in the repository) check without a
/// database: how a message becomes the values of its outbox row and back.
/// Not a public API.
#[doc(hidden)]
pub mod __fuzz {
    pub use crate::stored_row::StoredRow;
}

/// This crate's README (crates.io's page), whose examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
