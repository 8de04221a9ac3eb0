//! Everything the commands print, text and JSON: one file per command
//! (`render::<command>::<view>`), the shared pieces (times, states, JSON
//! lines) in `format`. The commands read or change, then print what these
//! return; nothing here reads or connects.

pub(crate) mod aggregate;
pub(crate) mod dead;
pub(crate) mod dlq;
mod format;
pub(crate) mod holds;
pub(crate) mod migrate;
pub(crate) mod purge;
pub(crate) mod status;
pub(crate) mod stream;
pub(crate) mod verify;
