//! SeaORM integration for the transactional outbox.
//!
//! This crate will hold the unit of work, the aggregate repository and the
//! [`OutboxStore`](outbox_core) implementations for PostgreSQL, MySQL/MariaDB
//! and SQLite. It is an empty skeleton until that work lands; the event model
//! it builds on lives in [`outbox_core`].

pub use outbox_core;
