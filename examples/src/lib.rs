//! Runnable examples of the transactional outbox.
//!
//! The binaries in `src/bin/` share the orders domain in [`orders`]: an
//! `Order` aggregate that records `OrderPlaced`, `OrderPaid`, `OrderShipped`
//! and `OrderCancelled`.

pub mod orders;
pub mod support;
