//! Holds (with `keep_order`): an aggregate whose message went to the dead
//! letters is held; its later messages are parked behind the hold until an
//! operator releases it, then applied in order.

pub(crate) mod hold;
pub(crate) mod holding;
pub(crate) mod release;

pub(crate) use hold::Holds;
