//! The in-memory store's [`OutboxStats`], by the SQL stores' rules: the
//! oldest pending age over the messages that are due and not held back by a
//! dead or not-yet-due earlier message of their aggregate, delayed messages
//! and blocked aggregates counted apart.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use txoutbox_core::store::{EventStats, OutboxStats};

use super::Table;
use super::row::{Row, Status};

impl Table {
    pub(super) fn stats(&self, now: DateTime<Utc>) -> OutboxStats {
        let mut stats = OutboxStats::default();
        let mut by_event: BTreeMap<&str, EventStats> = BTreeMap::new();
        for row in self.rows.values() {
            let counts = || EventStats::new(row.message.event_name.clone(), 0, 0);
            match row.status {
                Status::Pending => {
                    stats.pending += 1;
                    stats.leased += u64::from(row.is_leased(now));
                    stats.delayed += u64::from(row.is_delayed(now));
                    by_event
                        .entry(&row.message.event_name)
                        .or_insert_with(counts)
                        .pending += 1;
                }
                Status::Dead => {
                    stats.dead += 1;
                    by_event
                        .entry(&row.message.event_name)
                        .or_insert_with(counts)
                        .dead += 1;
                }
                Status::Published | Status::Skipped => {}
            }
        }
        stats.oldest_pending_age = self
            .oldest_waiting(now)
            .map(|row| (now - row.waiting_since()).to_std().unwrap_or_default());
        stats.blocked_aggregates = self.blocked_aggregates();
        stats.by_event = by_event.into_values().collect();
        stats
    }

    /// The first recorded pending message that should be moving: due (or
    /// backing off after a failed publish) and behind no dead or not-yet-due
    /// earlier message of its aggregate.
    fn oldest_waiting(&self, now: DateTime<Utc>) -> Option<&Row> {
        let mut oldest: Option<&Row> = None;
        for sequences in self.aggregates.values() {
            for id in sequences.values() {
                let Some(row) = self.rows.get(id) else {
                    continue;
                };
                if row.is_settled() {
                    continue;
                }
                if row.status == Status::Dead || row.next_attempt_at > now {
                    if row.status == Status::Pending && row.attempts > 0 {
                        // Backing off: it waits itself, and holds the rest.
                        oldest = first_recorded(oldest, row);
                    }
                    break;
                }
                oldest = first_recorded(oldest, row);
            }
        }
        oldest
    }

    /// Aggregates with a pending message after a dead one.
    fn blocked_aggregates(&self) -> u64 {
        let blocked = |sequences: &BTreeMap<u64, _>| {
            let mut behind_dead = false;
            for id in sequences.values() {
                match self.rows.get(id).map(|row| row.status) {
                    Some(Status::Dead) => behind_dead = true,
                    Some(Status::Pending) if behind_dead => return true,
                    _ => {}
                }
            }
            false
        };
        self.aggregates.values().filter(|s| blocked(s)).count() as u64
    }
}

/// Whichever of `oldest` and `row` was recorded first (ids are UUIDv7).
fn first_recorded<'a>(oldest: Option<&'a Row>, row: &'a Row) -> Option<&'a Row> {
    match oldest {
        Some(o) if o.message.id <= row.message.id => Some(o),
        _ => Some(row),
    }
}
