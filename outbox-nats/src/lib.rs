//! NATS JetStream integration for the transactional outbox.
//!
//! This crate will hold the JetStream publisher (with `Nats-Msg-Id` set to the
//! outbox message id) and the typed subscribers. It is an empty skeleton until
//! that work lands; the wire header names it will use are defined in
//! [`outbox_core::wire`].

pub use outbox_core;
