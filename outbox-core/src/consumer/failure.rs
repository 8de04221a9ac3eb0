//! [`FailureCause`]: whose fault a failed attempt at a message was.

/// Whose fault a failed attempt at applying a message was, as the inbox
/// that applied it tells from the error
/// ([`ConsumerInbox::cause_of`](super::ConsumerInbox::cause_of)). Only a
/// handler's own failure spends one of the message's deliveries; the
/// infrastructure's never does.
///
/// | cause | what the subscriber does |
/// |---|---|
/// | [`Handler`](Self::Handler) | the message is delivered again after its backoff, dead-lettered after its last delivery |
/// | [`Conflict`](Self::Conflict) | the attempt is run again at once, after a short pause; no delivery spent |
/// | [`Unavailable`](Self::Unavailable) | the subscriber pauses (starts no handler, keeps what it holds alive) until the database answers again, then applies what it held, in order; no delivery spent |
///
/// ```
/// use txoutbox_core::consumer::FailureCause;
///
/// assert!(FailureCause::Unavailable.spends_no_delivery());
/// assert!(!FailureCause::Handler.spends_no_delivery());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureCause {
    /// The handler failed (its own error, or anything not told apart).
    Handler,
    /// Other transactions were in the way: a deadlock, a serialization
    /// failure, a lock wait timeout. Running the attempt again may succeed.
    Conflict,
    /// The database is away: it refuses connections, is shutting down or
    /// restarting, a connection was lost, the pool had none to give in
    /// time, or it is a read-only replica (after a failover, before the
    /// service's address points at the new primary).
    Unavailable,
}

impl FailureCause {
    /// Whether a failure of this cause leaves the message's deliveries
    /// untouched (anything but [`Handler`](Self::Handler)).
    pub fn spends_no_delivery(self) -> bool {
        !matches!(self, FailureCause::Handler)
    }
}
