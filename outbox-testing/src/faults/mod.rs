//! Fault injection: wrap any [`Publisher`](txoutbox_core::Publisher) or
//! [`OutboxStore`](txoutbox_core::OutboxStore) and make it fail the way
//! production does, on command.
//!
//! - [`FaultyPublisher`]: acks lost after the broker stored the message (the
//!   processor publishes again; dedup absorbs it), acks delayed, the broker
//!   unavailable for a window, given messages rejected.
//! - [`FaultyStore`]: the next completions fail (the database went away
//!   after the publish), the next renewals report the lease lost.
//!
//! Recipes (each is a test in this crate's `tests/faults.rs`):
//! - "my service survives a 30 s broker outage": writes go on under
//!   [`FaultyPublisher::unavailable_for`]; a drain after the window
//!   publishes everything, in order, with no attempt spent;
//! - "a crash after publish and before completion publishes once":
//!   [`FaultyPublisher::lose_acks`] makes the broker store a message whose
//!   ack never comes back; the processor publishes it again and
//!   `MemoryPublisher::duplicates()` shows the broker absorbed it.

mod publisher;
mod store;

pub use publisher::FaultyPublisher;
pub use store::FaultyStore;

use std::sync::{Mutex, MutexGuard, PoisonError};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
