//! Takeover: what a process does about messages another process held —
//! failover between processes (a pinned client), the reader lease, the
//! restart guard (messages a crashed process held, handed back), the
//! orphaned window of a pinned process that is gone, and the nak that
//! hands messages back to JetStream for an immediate redelivery.

pub(crate) mod delivered_reads;
pub(crate) mod failover;
pub(crate) mod guard_pulls;
pub(crate) mod hand_back;
pub(crate) mod lease;
pub(crate) mod orphans;
pub(crate) mod restart;
pub(crate) mod standby;

pub(crate) use failover::{DEFAULT_PINNED_TTL, Pin};
pub(crate) use lease::{DEFAULT_LEASE, Gate, Lease, MIN_LEASE, keeps_leases};
