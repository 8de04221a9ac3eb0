//! Counts for dashboards and alarms: [`OutboxStats`].

use std::time::Duration;

/// Counts for dashboards and alarms (a store builds them from
/// `OutboxStats::default()`, setting the fields). Cheap to compute however many rows
/// the table holds: a store counts a bounded number of pending rows exactly
/// (the oldest first) and estimates past them, never reads published rows,
/// and finds the oldest pending message through an index.
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
    /// Age of the oldest pending message, by the database clock.
    pub oldest_pending_age: Option<Duration>,
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
