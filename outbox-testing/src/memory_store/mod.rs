//! [`MemoryStore`]: the outbox table in memory, by the same contract as the
//! SQL stores.

mod claim;
mod outbox_admin;
mod outbox_store;
mod row;
mod settle;
mod stats;
mod view;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

use txoutbox_core::{
    AggregateChanges, AggregateRoot, IntegrationEvent, MessageContext, MessageId, OutboxMessage,
    PendingMessage, RecordError, SubjectPrefix,
};

use crate::clock::TestClock;
use row::Row;
pub use view::{MemoryRow, RowStatus};

/// An aggregate: its type and id, ordered as the SQL claim walks them.
type AggregateKey = (String, String);

/// The outbox table in memory: an [`OutboxStore`](txoutbox_core::OutboxStore)
/// that keeps the SQL stores' contract (per-aggregate order, leases and
/// fencing tokens, retries with backoff, dead messages that hold their
/// aggregate, delayed messages, abandoned-claim counts) and passes the same
/// contract suite ([`contract`](crate::contract)). Time is its
/// [`TestClock`]'s, so a test jumps over a backoff or a lease.
///
/// Writing is the unit of work's job in a service; here
/// [`save`](MemoryStore::save) does it for an aggregate (with the version
/// check) and [`enqueue`](MemoryStore::enqueue) for a standalone event.
/// Published rows are kept, so a test can read them back.
///
/// ```
/// # use txoutbox_core::{AggregateRoot, EventBuffer, IntegrationEvent};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize, IntegrationEvent)]
/// # #[event(name = "doc.order.placed")]
/// # struct OrderPlaced { order_id: u64 }
/// # #[derive(AggregateRoot)]
/// # #[aggregate(type = "order")]
/// # struct Order { #[aggregate(id)] id: u64, events: EventBuffer }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use txoutbox_testing::MemoryStore;
///
/// let store = MemoryStore::new();
/// let mut order = Order { id: 7, events: EventBuffer::new() };
/// order.record(OrderPlaced { order_id: 7 })?;
/// store.save(&mut order)?;
/// assert_eq!(order.version(), 1);
/// assert_eq!(store.pending().len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    state: Arc<Mutex<Table>>,
    clock: TestClock,
    prefix: SubjectPrefix,
}

/// What the store holds.
#[derive(Debug, Default)]
struct Table {
    rows: HashMap<MessageId, Row>,
    /// Every aggregate's messages by sequence (published ones included).
    aggregates: BTreeMap<AggregateKey, BTreeMap<u64, MessageId>>,
    /// Each aggregate's stored version, for the optimistic check.
    versions: HashMap<AggregateKey, u64>,
    /// Where the next ordinary claim starts (fairness between aggregates).
    cursor: Option<AggregateKey>,
}

/// A write the store refused; nothing of it was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The aggregate was saved by someone else since it was loaded.
    #[error(
        "concurrency conflict on {aggregate_type} {aggregate_id}: expected version {expected}, stored {stored}"
    )]
    ConcurrencyConflict {
        /// The aggregate type.
        aggregate_type: String,
        /// The aggregate id.
        aggregate_id: String,
        /// The version the save expected.
        expected: u64,
        /// The version stored.
        stored: u64,
    },
    /// A message with this aggregate and sequence, or this id, is stored
    /// already (the SQL stores' unique keys).
    #[error("{0} is stored already")]
    Duplicate(String),
    /// The event could not be recorded (it does not serialize).
    #[error(transparent)]
    Record(#[from] RecordError),
}

impl MemoryStore {
    /// An empty store on a clock of its own.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store deciding by `clock` (share one clock with the rest of
    /// a test).
    pub fn with_clock(clock: TestClock) -> Self {
        Self {
            clock,
            ..Self::default()
        }
    }

    /// Subjects under `prefix` (as `OutboxConfig::subject_prefix` in
    /// `outbox-sea-orm`).
    pub fn with_subject_prefix(mut self, prefix: SubjectPrefix) -> Self {
        self.prefix = prefix;
        self
    }

    /// The store's clock.
    pub fn clock(&self) -> &TestClock {
        &self.clock
    }

    /// Writes the aggregate's recorded events, as the unit of work's save
    /// does: only if its stored version is still the one it was loaded at;
    /// then the aggregate is at its new version with no pending events.
    /// Returns the messages' ids in sequence order.
    pub fn save<A: AggregateRoot>(&self, aggregate: &mut A) -> Result<Vec<MessageId>, WriteError> {
        self.save_with(aggregate, &MessageContext::new())
    }

    /// [`save`](MemoryStore::save) with a context (correlation, causation,
    /// tenant, headers) stamped on the messages.
    pub fn save_with<A: AggregateRoot>(
        &self,
        aggregate: &mut A,
        context: &MessageContext,
    ) -> Result<Vec<MessageId>, WriteError> {
        let changes = AggregateChanges::of(&*aggregate, context, &self.prefix);
        let key = (
            changes.aggregate_type.to_owned(),
            changes.aggregate_id.clone(),
        );
        let mut table = self.table();
        let stored = table.versions.get(&key).copied().unwrap_or(0);
        if stored != changes.expected_version {
            return Err(WriteError::ConcurrencyConflict {
                aggregate_type: key.0,
                aggregate_id: key.1,
                expected: changes.expected_version,
                stored,
            });
        }
        let ids = table.insert(changes.messages, &self.clock)?;
        table.versions.insert(key, changes.new_version);
        drop(table);
        aggregate.events_mut().mark_saved(changes.new_version);
        Ok(ids)
    }

    /// Writes an event that belongs to no aggregate (its own ordering
    /// group, as `UnitOfWork::enqueue`).
    pub fn enqueue<E: IntegrationEvent>(&self, event: &E) -> Result<MessageId, WriteError> {
        let message = OutboxMessage::standalone(
            PendingMessage::new(event)?,
            &MessageContext::new(),
            &self.prefix,
        );
        let id = message.id;
        self.write(vec![message])?;
        Ok(id)
    }

    /// Writes sealed messages as one commit: all or none.
    pub fn write(&self, messages: Vec<OutboxMessage>) -> Result<Vec<MessageId>, WriteError> {
        self.table().insert(messages, &self.clock)
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Table {
    fn insert(
        &mut self,
        messages: Vec<OutboxMessage>,
        clock: &TestClock,
    ) -> Result<Vec<MessageId>, WriteError> {
        for (k, message) in messages.iter().enumerate() {
            let key = (message.aggregate_type.clone(), message.aggregate_id.clone());
            let taken = self
                .aggregates
                .get(&key)
                .is_some_and(|sequences| sequences.contains_key(&message.sequence))
                || messages[..k].iter().any(|earlier| {
                    earlier.aggregate_type == message.aggregate_type
                        && earlier.aggregate_id == message.aggregate_id
                        && earlier.sequence == message.sequence
                });
            if taken {
                return Err(WriteError::Duplicate(format!(
                    "{} {} #{}",
                    message.aggregate_type, message.aggregate_id, message.sequence
                )));
            }
            if self.rows.contains_key(&message.id)
                || messages[..k].iter().any(|earlier| earlier.id == message.id)
            {
                return Err(WriteError::Duplicate(format!("message {}", message.id)));
            }
        }
        let now = clock.now();
        let mut ids = Vec::with_capacity(messages.len());
        for message in messages {
            let key = (message.aggregate_type.clone(), message.aggregate_id.clone());
            self.aggregates
                .entry(key)
                .or_default()
                .insert(message.sequence, message.id);
            ids.push(message.id);
            self.rows.insert(message.id, Row::new(message, now));
        }
        Ok(ids)
    }
}

/// `now + by`, saturating at the end of time.
fn later(now: DateTime<Utc>, by: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(by)
        .ok()
        .and_then(|by| now.checked_add_signed(by))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}
