//! Settling leased messages (complete, fail, release, renew), each fenced
//! by the lease token, and the operator's maintenance (requeue, purge), as
//! the SQL stores do them.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use txoutbox_core::store::{
    DeadSelector, Failure, FailureKind, LeaseOutcome, LeaseToken, Published, SkipNote,
};
use txoutbox_core::{MessageId, RetryPolicy};

use super::Table;
use super::row::{Row, RowLease, Status};

fn outcome(asked: usize, applied: u64) -> LeaseOutcome {
    LeaseOutcome::new(applied, (asked as u64).saturating_sub(applied))
}

impl Table {
    /// Applies `change` to each of `ids` still held by `token` (and, when
    /// `unleased_too`, to each pending one no lease holds).
    fn settle(
        &mut self,
        token: LeaseToken,
        ids: impl ExactSizeIterator<Item = MessageId>,
        unleased_too: bool,
        mut change: impl FnMut(&mut Row),
    ) -> LeaseOutcome {
        let asked = ids.len();
        let mut applied = 0;
        for id in ids {
            let settles = |row: &&mut Row| {
                row.is_held_by(token)
                    || (unleased_too && row.status == Status::Pending && row.lease.is_none())
            };
            if let Some(row) = self.rows.get_mut(&id).filter(settles) {
                change(row);
                applied += 1;
            }
        }
        outcome(asked, applied)
    }

    pub(super) fn complete(
        &mut self,
        token: LeaseToken,
        published: &[Published],
        now: DateTime<Utc>,
    ) -> LeaseOutcome {
        let sequences: BTreeMap<MessageId, Option<u64>> = published
            .iter()
            .map(|p| (p.id, p.stream_sequence))
            .collect();
        self.settle(token, published.iter().map(|p| p.id), true, |row| {
            row.status = Status::Published;
            row.settled_at = Some(now);
            row.stream_sequence = sequences.get(&row.message.id).copied().flatten();
            row.lease = None;
        })
    }

    pub(super) fn fail(
        &mut self,
        token: LeaseToken,
        failures: &[Failure],
        policy: &RetryPolicy,
        now: DateTime<Utc>,
    ) -> LeaseOutcome {
        let asked = failures.len();
        let mut applied = 0;
        for failure in failures {
            let outcome = self.settle(token, std::iter::once(failure.id), false, |row| {
                let out_of_attempts = row.attempts + 1 >= policy.max_attempts.max(1);
                if failure.kind == FailureKind::Permanent || out_of_attempts {
                    row.status = Status::Dead;
                }
                row.next_attempt_at = super::later(now, backoff(policy, row.attempts));
                row.last_error = Some(failure.error.clone());
                row.lease = None;
                row.attempts += 1;
            });
            applied += outcome.applied;
        }
        outcome(asked, applied)
    }

    pub(super) fn release(&mut self, token: LeaseToken, ids: &[MessageId]) -> LeaseOutcome {
        self.settle(token, ids.iter().copied(), false, |row| row.lease = None)
    }

    pub(super) fn renew(
        &mut self,
        token: LeaseToken,
        ids: &[MessageId],
        expires_at: DateTime<Utc>,
    ) -> LeaseOutcome {
        self.settle(token, ids.iter().copied(), false, |row| {
            row.lease = Some(RowLease { token, expires_at });
        })
    }

    pub(super) fn requeue_dead(&mut self, selector: &DeadSelector, now: DateTime<Utc>) -> u64 {
        let mut requeued = 0;
        for row in self.rows.values_mut() {
            let chosen = match selector {
                DeadSelector::Ids(ids) => ids.contains(&row.message.id),
                DeadSelector::EventName(name) => &row.message.event_name == name,
                DeadSelector::All => true,
                // A selector newer than this store chooses nothing.
                _ => false,
            };
            if row.status == Status::Dead && chosen {
                row.status = Status::Pending;
                row.attempts = 0;
                row.abandoned = 0;
                row.next_attempt_at = now;
                row.lease = None;
                requeued += 1;
            }
        }
        requeued
    }

    pub(super) fn skip_dead(&mut self, id: MessageId, note: &SkipNote, now: DateTime<Utc>) -> bool {
        match self.rows.get_mut(&id) {
            Some(row) if row.status == Status::Dead => {
                row.status = Status::Skipped;
                row.settled_at = Some(now);
                row.skip_note = Some(note.clone());
                true
            }
            _ => false,
        }
    }

    pub(super) fn purge_published(&mut self, before: DateTime<Utc>) -> u64 {
        let old: Vec<MessageId> = self
            .rows
            .values()
            .filter(|row| row.is_settled())
            .filter(|row| row.settled_at.is_some_and(|at| at < before))
            .map(|row| row.message.id)
            .collect();
        for id in &old {
            if let Some(row) = self.rows.remove(id) {
                let key = (row.message.aggregate_type, row.message.aggregate_id);
                if let Some(sequences) = self.aggregates.get_mut(&key) {
                    sequences.remove(&row.message.sequence);
                }
            }
        }
        old.len() as u64
    }
}

/// `min(max, initial * 2^attempts)` with equal jitter, as the SQL stores'
/// backoff over the row's attempts before this failure.
fn backoff(policy: &RetryPolicy, attempts: u32) -> Duration {
    let floor = Duration::from_millis(1);
    let doubled = policy
        .initial_backoff
        .max(floor)
        .saturating_mul(1u32 << attempts.min(31));
    txoutbox_core::backoff::jittered(doubled.min(policy.max_backoff.max(floor)))
}
