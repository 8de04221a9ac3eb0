//! Support for the workspace-level integration tests in `tests/tests/`:
//! the shared fixtures (`txoutbox-fixtures`) and the suite's own: private
//! database servers, child processes, effects, the store contract.

pub mod contract;
pub mod effects;
pub mod private_mariadb;
pub mod private_postgres;
pub mod private_server;
pub mod process;
pub mod steps;

// The fixtures the command's tests and the benchmarks share with the suite.
pub use txoutbox_fixtures::{
    Backend, TestDb, backend_tests, claimed_positions, db, each_backend, jetstream, nats, orders,
    subscriber,
};

/// `message` with its payload in one canonical JSON form (keys sorted,
/// compact), to compare envelopes whatever the store did to the payload's
/// text (PostgreSQL keeps payloads as `jsonb`, which reorders keys).
pub fn canonical(mut message: txoutbox_core::OutboxMessage) -> txoutbox_core::OutboxMessage {
    let value: serde_json::Value =
        serde_json::from_str(message.payload.as_str()).expect("payloads are JSON");
    message.payload = txoutbox_core::Payload::from_json(value.to_string()).expect("JSON");
    message
}
