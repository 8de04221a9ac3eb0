//! Counts for dashboards and alarms: [`OutboxStats`].

use std::time::Duration;

/// Counts for dashboards and alarms (a store builds them from
/// `OutboxStats::default()`, setting the fields). Cheap to compute however many rows
/// the table holds: a store counts a bounded number of pending rows exactly
/// (the oldest first) and estimates past them, never reads published rows,
/// finds the oldest waiting message through an index, and blocked
/// aggregates from the dead messages (which are few).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct OutboxStats {
    /// Messages waiting to be published (leased or not); an estimate when
    /// [`pending_is_estimate`](Self::pending_is_estimate) is set.
    pub pending: u64,
    /// More messages are pending than the store counts exactly: `pending` is
    /// an estimate (at least the exact limit), and `leased` and the
    /// per-event pending counts cover the oldest pending messages only.
    pub pending_is_estimate: bool,
    /// Pending messages under a live lease.
    pub leased: u64,
    /// Messages that will not be retried.
    pub dead: u64,
    /// How long the oldest message that should be moving has waited, by
    /// the database clock: over the pending messages that are due and not
    /// waiting behind a dead or not-yet-due earlier message of their
    /// aggregate (the claim's rule), the time since it became due (since it
    /// was recorded, or since its delay ended or it was requeued; a message
    /// backing off after a failed publish counts from when it was
    /// recorded). `None` when no such message is pending. Neither a delayed
    /// message ([`delayed`](Self::delayed)) nor the messages of a blocked
    /// aggregate ([`blocked_aggregates`](Self::blocked_aggregates)) age it,
    /// so a value above a threshold is a real stall. When
    /// [`pending_is_estimate`](Self::pending_is_estimate) is set it is
    /// taken among the oldest pending messages the store counts exactly.
    pub oldest_pending_age: Option<Duration>,
    /// Pending messages recorded with a delay that are not due yet (a
    /// retry's backoff is not a delay); among the oldest pending messages
    /// only when [`pending_is_estimate`](Self::pending_is_estimate) is set.
    pub delayed: u64,
    /// Aggregates whose pending messages wait behind a dead message of
    /// theirs: they move again once it is requeued or skipped.
    pub blocked_aggregates: u64,
    /// Pending and dead counts per event name, sorted by name.
    pub by_event: Vec<EventStats>,
}

/// Counts of one event name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventStats {
    /// The event name.
    pub event_name: String,
    /// Pending messages.
    pub pending: u64,
    /// Dead messages.
    pub dead: u64,
}

impl EventStats {
    /// The counts of `event_name`.
    pub fn new(event_name: impl Into<String>, pending: u64, dead: u64) -> Self {
        Self {
            event_name: event_name.into(),
            pending,
            dead,
        }
    }
}
