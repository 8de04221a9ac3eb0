//! One outbox row in memory, and the rules that say when it may be claimed.

use chrono::{DateTime, Utc};
use txoutbox_core::OutboxMessage;
use txoutbox_core::store::{ClaimedMessage, LeaseToken, SkipNote};

/// Where a row is in its life, as the SQL stores' `status` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Pending,
    Published,
    Dead,
    /// Dead, then settled unpublished by an operator.
    Skipped,
}

/// A live or expired lease on a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowLease {
    pub(crate) token: LeaseToken,
    pub(crate) expires_at: DateTime<Utc>,
}

/// An outbox row: the message and its bookkeeping.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) message: OutboxMessage,
    pub(crate) status: Status,
    pub(crate) attempts: u32,
    pub(crate) abandoned: u32,
    pub(crate) lease: Option<RowLease>,
    pub(crate) next_attempt_at: DateTime<Utc>,
    pub(crate) last_error: Option<String>,
    pub(crate) created_at: DateTime<Utc>,
    /// When it was published or skipped.
    pub(crate) settled_at: Option<DateTime<Utc>>,
    /// Who skipped it and why.
    pub(crate) skip_note: Option<SkipNote>,
    pub(crate) stream_sequence: Option<u64>,
}

impl Row {
    /// A new pending row, written at `now`.
    pub(crate) fn new(message: OutboxMessage, now: DateTime<Utc>) -> Self {
        Self {
            next_attempt_at: message.deliver_at.unwrap_or(now),
            message,
            status: Status::Pending,
            attempts: 0,
            abandoned: 0,
            lease: None,
            last_error: None,
            created_at: now,
            settled_at: None,
            skip_note: None,
            stream_sequence: None,
        }
    }

    /// Published or skipped: it no longer holds its aggregate back.
    pub(crate) fn is_settled(&self) -> bool {
        matches!(self.status, Status::Published | Status::Skipped)
    }

    /// Pending, due, and not under a live lease: a claim may take it.
    pub(crate) fn is_publishable(&self, now: DateTime<Utc>) -> bool {
        self.status == Status::Pending && self.next_attempt_at <= now && !self.is_leased(now)
    }

    /// Pending, recorded with a delay (or requeued for later) and not due
    /// yet; a retry's backoff (`attempts` > 0) is not a delay.
    pub(crate) fn is_delayed(&self, now: DateTime<Utc>) -> bool {
        self.status == Status::Pending && self.attempts == 0 && self.next_attempt_at > now
    }

    /// Since when it should have been moving: when it became due (recorded,
    /// its delay ended, requeued), or for a message backing off after a
    /// failed publish, when it was recorded.
    pub(crate) fn waiting_since(&self) -> DateTime<Utc> {
        if self.attempts == 0 {
            self.created_at.max(self.next_attempt_at)
        } else {
            self.created_at
        }
    }

    /// Under a lease that has not run out.
    pub(crate) fn is_leased(&self, now: DateTime<Utc>) -> bool {
        self.lease.is_some_and(|lease| lease.expires_at > now)
    }

    /// Pending and carrying `token` (live or not: a settlement is fenced by
    /// the token alone, as in the SQL stores).
    pub(crate) fn is_held_by(&self, token: LeaseToken) -> bool {
        self.status == Status::Pending && self.lease.is_some_and(|lease| lease.token == token)
    }

    /// Leases the row to `lease`, counting a takeover of a lease that ran
    /// out as an abandoned claim; returns it as claimed.
    pub(crate) fn claim(&mut self, lease: RowLease) -> ClaimedMessage {
        if self.lease.is_some() {
            self.abandoned += 1;
        }
        self.lease = Some(lease);
        ClaimedMessage {
            message: self.message.clone(),
            attempts: self.attempts,
            abandoned: self.abandoned,
        }
    }
}
