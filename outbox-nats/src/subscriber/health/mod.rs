//! Health: a running subscriber's probe, its metrics, the pause while the
//! inbox's database is away, and the inbox's cleanup.

pub(crate) mod cleanup;
pub mod metrics;
pub(crate) mod pause;
pub(crate) mod probe;

pub(crate) use metrics::{
    ACK_FAILURES_TOTAL, HANDLED_TOTAL, HANDLER_DURATION_SECONDS, HELD_AGGREGATES, IN_FLIGHT,
    UNKNOWN_EVENT,
};
pub(crate) use pause::Pause;
