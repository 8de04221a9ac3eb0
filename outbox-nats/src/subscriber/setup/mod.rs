//! Setting a subscriber up: what it creates or verifies on the server
//! (stream, dead-letter stream, durable consumers, one per owned partition)
//! and the state every task of a running subscriber shares.

pub(crate) mod assemble;
pub(crate) mod consumer;
pub(crate) mod partitioned;
pub(crate) mod server;
pub(crate) mod shared;
pub(crate) mod status;

pub(crate) use partitioned::{Owned, PullSpec};
pub(crate) use shared::Shared;
pub(crate) use status::SetupState;
