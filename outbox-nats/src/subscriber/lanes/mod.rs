//! Lanes: each aggregate's messages one after another, in stream order,
//! different aggregates in parallel. A message goes from the fetch loop
//! into its aggregate's lane, through dispatch (envelope, handler, decision)
//! to its settlement (ack, nak with a delay, or dead letter).

pub(crate) mod dispatch;
pub(crate) mod fetch;
pub(crate) mod ordering;
pub(crate) mod settle;
pub(crate) mod stalled_pulls;
pub(crate) mod worker;
