//! Claiming, as the SQL stores claim: walk the aggregates from where the
//! last claim stopped, take each one's run of publishable messages
//! from its head, never a message behind an unpublished one.

use std::collections::HashSet;
use std::ops::Bound;

use chrono::{DateTime, Utc};
use txoutbox_core::MessageId;
use txoutbox_core::store::ClaimedMessage;

use super::row::RowLease;
use super::{AggregateKey, Table};

impl Table {
    /// Leases up to `limit` messages: the ordinary claim.
    pub(super) fn claim(
        &mut self,
        limit: usize,
        lease: RowLease,
        now: DateTime<Utc>,
    ) -> Vec<ClaimedMessage> {
        let start = self.cursor.take();
        let after: Vec<AggregateKey> = match &start {
            Some(cursor) => self
                .aggregates
                .range::<AggregateKey, _>((Bound::Excluded(cursor), Bound::Unbounded))
                .map(|(key, _)| key.clone())
                .collect(),
            None => self.aggregates.keys().cloned().collect(),
        };
        let before: Vec<AggregateKey> = match &start {
            Some(cursor) => self
                .aggregates
                .range::<AggregateKey, _>((Bound::Unbounded, Bound::Included(cursor)))
                .map(|(key, _)| key.clone())
                .collect(),
            None => Vec::new(),
        };
        let mut claimed = Vec::new();
        for key in after.into_iter().chain(before) {
            if claimed.len() >= limit {
                break;
            }
            let room = limit - claimed.len();
            let run = self.run_from_head(&key, now, room, |_| true);
            if !run.is_empty() {
                if claimed.len() + run.len() >= limit {
                    self.cursor = Some(key);
                }
                claimed.extend(self.lease_rows(&run, lease));
            }
        }
        claimed
    }

    /// Leases those of `ids` that an ordinary claim could take with every
    /// unpublished message before them in the same claim.
    pub(super) fn claim_ids(
        &mut self,
        ids: &[MessageId],
        lease: RowLease,
        now: DateTime<Utc>,
    ) -> Vec<ClaimedMessage> {
        let named: HashSet<MessageId> = ids.iter().copied().collect();
        let mut keys: Vec<AggregateKey> = ids
            .iter()
            .filter_map(|id| self.rows.get(id))
            .map(|row| {
                (
                    row.message.aggregate_type.clone(),
                    row.message.aggregate_id.clone(),
                )
            })
            .collect();
        keys.sort();
        keys.dedup();
        let mut claimed = Vec::new();
        for key in keys {
            let run = self.run_from_head(&key, now, usize::MAX, |id| named.contains(id));
            claimed.extend(self.lease_rows(&run, lease));
        }
        claimed
    }

    /// The aggregate's run from its head (its lowest unpublished message):
    /// consecutive messages that are publishable now and `wanted`, at most
    /// `room` of them. Empty when the head is leased, backing off, delayed
    /// or dead.
    fn run_from_head(
        &self,
        key: &AggregateKey,
        now: DateTime<Utc>,
        room: usize,
        wanted: impl Fn(&MessageId) -> bool,
    ) -> Vec<MessageId> {
        let Some(sequences) = self.aggregates.get(key) else {
            return Vec::new();
        };
        sequences
            .values()
            .filter(|id| self.rows.get(id).is_some_and(|row| !row.is_settled()))
            .take_while(|id| {
                wanted(id) && self.rows.get(id).is_some_and(|row| row.is_publishable(now))
            })
            .take(room)
            .copied()
            .collect()
    }

    fn lease_rows(&mut self, ids: &[MessageId], lease: RowLease) -> Vec<ClaimedMessage> {
        let mut claimed = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(row) = self.rows.get_mut(id) {
                claimed.push(row.claim(lease));
            }
        }
        claimed
    }
}
