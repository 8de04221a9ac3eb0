//! Support for the workspace-level integration tests in `tests/tests/`:
//! an isolated database per test on each real backend, and fixtures.

pub mod contract;
pub mod db;
pub mod effects;
pub mod jetstream;
pub mod nats;
pub mod orders;
pub mod private_mariadb;
pub mod private_postgres;
pub mod process;
pub mod subscriber;

pub use db::{Backend, TestDb, claimed_positions};

/// `message` with its payload in one canonical JSON form (keys sorted,
/// compact), to compare envelopes whatever the store did to the payload's
/// text (PostgreSQL keeps payloads as `jsonb`, which reorders keys).
pub fn canonical(mut message: txoutbox_core::OutboxMessage) -> txoutbox_core::OutboxMessage {
    let value: serde_json::Value =
        serde_json::from_str(message.payload.as_str()).expect("payloads are JSON");
    message.payload = txoutbox_core::Payload::from_json(value.to_string()).expect("JSON");
    message
}
