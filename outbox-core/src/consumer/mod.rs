//! The consumer contract: what a message handler is given and how it fails
//! ([`Delivery`], [`HandlerError`]), and what a consumer's inbox tells a
//! subscriber that keeps per-aggregate order: the messages it already
//! applied ([`AppliedMessages`]) and the aggregates it holds behind a
//! message it could not apply ([`HeldMessages`], [`Hold`], [`Release`]),
//! the transaction a group of messages is applied in ([`InboxGroup`]) and
//! the handlers that run in it ([`GroupedHandler`]),
//! and the lease that makes one process its durable's reader
//! ([`ReaderLease`]).
//!
//! Typed subscribers (`outbox-nats`) and the inbox (`outbox-sea-orm`) share
//! these types, so neither depends on the other. [`Delivery`] and
//! [`HandlerError`] are also at the crate root.

mod applied;
mod delivery;
mod failure;
mod group;
mod grouped;
mod handler;
mod handler_error;
mod held;
mod inbox;
mod lease;

pub use applied::{AppliedFuture, AppliedMessages};
pub use delivery::Delivery;
pub use failure::FailureCause;
pub use group::{GroupEntry, GroupFuture, GroupKey, InboxGroup};
pub use grouped::{GroupHandlerFuture, GroupedHandler};
pub use handler::{Handler, HandlerFuture};
pub use handler_error::{BoxError, HandlerError};
pub use held::{HeldFuture, HeldMessages, Hold, ParkedMessage, Release, Unpark};
pub use inbox::ConsumerInbox;
pub use lease::ReaderLease;
