//! [`ReaderLease`]: who reads a durable consumer, as the inbox's database
//! says.
//!
//! A subscriber that keeps per-aggregate order must be the only process
//! applying its durable's messages: two readers would apply one
//! aggregate's messages side by side. The broker cannot promise that alone
//! (two processes started in the same second both find the durable free;
//! a pin the server gives one process is lost at a leader change), so the
//! subscriber also holds a lease in its inbox's database: a row per
//! durable with the holder, a fencing token and an expiry by the
//! database's clock. It takes the lease before its first pull, renews it
//! every third of its duration, and gives it up when it stops; a process
//! that finds it held by another stands by, pulling nothing.

/// What a take or renewal of a reader lease found
/// ([`ConsumerInbox::take_lease`](super::ConsumerInbox::take_lease)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReaderLease {
    /// The caller holds it, until the duration it asked for has passed by
    /// the database's clock. `token` grows each time the lease passes to
    /// another holder, never when the same holder renews (or takes it
    /// again after it expired with nobody else taking it).
    Ours {
        /// The fencing token.
        token: u64,
    },
    /// Another holder has it and it has not expired.
    Theirs {
        /// Who holds it.
        holder: String,
    },
}
