//! Handlers: typed handlers behind one object-safe interface, looked up by
//! event name.

pub(crate) mod registry;

pub(crate) use registry::{ErasedHandler, Handlers, Typed};
