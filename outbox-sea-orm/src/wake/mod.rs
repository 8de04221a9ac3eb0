//! Waking processors when messages are committed, without taxing writers.
//!
//! Three kinds of wake-up, one room each:
//! - [`local`]: this process's commits reach its processor over a broadcast
//!   channel ([`CommitListener`], what it hears is a [`CommitEvent`]), with
//!   no query; while a processor of this process serves them, its writers
//!   even write their messages leased to it (`txoutbox_core::processor::__handover::LeaseOffer`).
//! - [`remote`]: other processes hear of commits by PostgreSQL `NOTIFY`,
//!   sent after commit (never inside the writer's transaction: `pg_notify`
//!   there serializes commits on a global lock; measured here, 8 writers
//!   fell from 5,000 to ~1,900-2,700 transactions/s), coalesced to at most
//!   one per millisecond, naming the committed messages ([`notice`] is the
//!   payload's format).
//! - [`pg_listen`]: a processor's `LISTEN` side of those notifications
//!   ([`PgNotifications`]).
//!
//! Both [`CommitListener`] and [`PgNotifications`] are
//! `txoutbox_core::processor::WakeSource`s: the processor's `WakeHandle` is what they
//! wake.

pub(crate) mod local;
pub(crate) mod notice;
pub(crate) mod pg_listen;
pub(crate) mod remote;

pub(crate) use local::Wakers;
pub use local::{CommitEvent, CommitListener};
pub use pg_listen::PgNotifications;
