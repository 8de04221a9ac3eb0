//! Aggregates record domain events; saving turns them into outbox messages.

use crate::context::MessageContext;
use crate::event::IntegrationEvent;
use crate::message::{AggregateRef, OutboxMessage};
use crate::pending::{PendingMessage, RecordError};
use crate::subject::SubjectPrefix;

/// The events an aggregate recorded since it was loaded, and the version it
/// was loaded at.
///
/// Embed one in each aggregate (in a SeaORM model, as an
/// `#[sea_orm(ignore)]` field). Domain code only calls
/// [`record`](EventBuffer::record); the repository reads the version and the
/// events when it saves, and calls [`mark_saved`](EventBuffer::mark_saved)
/// after the commit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventBuffer {
    version: u64,
    pending: Vec<PendingMessage>,
}

impl EventBuffer {
    /// A buffer for a new aggregate (version 0, never saved).
    pub fn new() -> Self {
        Self::default()
    }

    /// A buffer for an aggregate loaded at `version`.
    pub fn at_version(version: u64) -> Self {
        Self {
            version,
            pending: Vec::new(),
        }
    }

    /// Serializes `event` and keeps it until the aggregate is saved. A
    /// serialization error is returned here, not at commit.
    pub fn record<E: IntegrationEvent>(&mut self, event: E) -> Result<(), RecordError> {
        self.record_message(PendingMessage::new(&event)?);
        Ok(())
    }

    /// Serializes `event` to be published no earlier than `at` (see
    /// [`PendingMessage::with_deliver_at`]); the aggregate's later events
    /// wait behind it.
    pub fn record_delayed<E: IntegrationEvent>(
        &mut self,
        event: E,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), RecordError> {
        self.record_message(PendingMessage::new(&event)?.with_deliver_at(at));
        Ok(())
    }

    /// Keeps an already-built message (e.g. one with its own headers).
    pub fn record_message(&mut self, message: PendingMessage) {
        self.pending.push(message);
    }

    /// The version the aggregate was loaded at (0 for a new one).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The events recorded since loading, oldest first.
    pub fn pending(&self) -> &[PendingMessage] {
        &self.pending
    }

    /// Removes and returns the recorded events.
    pub fn take(&mut self) -> Vec<PendingMessage> {
        std::mem::take(&mut self.pending)
    }

    /// Called after a successful commit: the aggregate is now at
    /// `new_version` and its events are in the outbox.
    pub fn mark_saved(&mut self, new_version: u64) {
        self.version = new_version;
        self.pending.clear();
    }
}

/// A consistency boundary whose changes are saved together with the events
/// it recorded.
///
/// Derive it (see [`derive@crate::AggregateRoot`] for the attributes) on a struct
/// that embeds an [`EventBuffer`]:
///
/// ```
/// use txoutbox_core::{AggregateRoot, EventBuffer, IntegrationEvent};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, IntegrationEvent)]
/// #[event(name = "order.placed")]
/// struct OrderPlaced { order_id: u64, total_cents: u64 }
///
/// #[derive(AggregateRoot)]
/// #[aggregate(type = "order")]
/// struct Order {
///     #[aggregate(id)]
///     id: u64,
///     total_cents: u64,
///     events: EventBuffer,
/// }
///
/// impl Order {
///     fn place(id: u64, total_cents: u64) -> Result<Self, txoutbox_core::RecordError> {
///         let mut order = Order { id, total_cents, events: EventBuffer::new() };
///         order.record(OrderPlaced { order_id: id, total_cents })?;
///         Ok(order)
///     }
/// }
///
/// let order = Order::place(7, 1250)?;
/// assert_eq!(order.events().pending().len(), 1);
/// # Ok::<(), txoutbox_core::RecordError>(())
/// ```
///
/// The derive writes the three required items; by hand they read:
///
/// ```
/// # use txoutbox_core::{AggregateRoot, EventBuffer};
/// struct Order { id: u64, events: EventBuffer }
///
/// impl AggregateRoot for Order {
///     const AGGREGATE_TYPE: &'static str = "order";
///     fn aggregate_id(&self) -> String { self.id.to_string() }
///     fn events(&self) -> &EventBuffer { &self.events }
///     fn events_mut(&mut self) -> &mut EventBuffer { &mut self.events }
/// }
/// ```
pub trait AggregateRoot {
    /// The aggregate type, e.g. `order`; stored on every message.
    const AGGREGATE_TYPE: &'static str;

    /// The aggregate's id as text.
    fn aggregate_id(&self) -> String;

    /// The recorded events and loaded version.
    fn events(&self) -> &EventBuffer;

    /// The recorded events and loaded version, mutably.
    fn events_mut(&mut self) -> &mut EventBuffer;

    /// The version the aggregate was loaded at, for optimistic concurrency.
    fn version(&self) -> u64 {
        self.events().version()
    }

    /// Records `event` to be saved with the aggregate.
    fn record<E: IntegrationEvent>(&mut self, event: E) -> Result<(), RecordError>
    where
        Self: Sized,
    {
        self.events_mut().record(event)
    }

    /// Records `event` to be published no earlier than `at` (a reminder, a
    /// timeout); the aggregate's later events wait behind it, so
    /// per-aggregate order holds.
    fn record_delayed<E: IntegrationEvent>(
        &mut self,
        event: E,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), RecordError>
    where
        Self: Sized,
    {
        self.events_mut().record_delayed(event, at)
    }

    /// Removes and returns the recorded events.
    fn take_events(&mut self) -> Vec<PendingMessage> {
        self.events_mut().take()
    }
}

/// What saving an aggregate writes: the version check, the new version, and
/// its recorded events sealed into messages with their sequence numbers.
///
/// Sequence numbers follow the version: an aggregate at version `v` that
/// recorded `n` events gets sequences `v+1 ..= v+n` and moves to version
/// `v+n` (or `v+1` when it recorded nothing, so every save still moves the
/// version). Two saves of one aggregate therefore never produce messages out
/// of order, and a concurrent save is caught by the version check.
///
/// ```
/// # use txoutbox_core::{AggregateRoot, EventBuffer, IntegrationEvent};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize, IntegrationEvent)]
/// # #[event(name = "order.placed")]
/// # struct OrderPlaced { order_id: u64 }
/// # #[derive(AggregateRoot)]
/// # #[aggregate(type = "order")]
/// # struct Order { #[aggregate(id)] id: u64, events: EventBuffer }
/// use txoutbox_core::{AggregateChanges, MessageContext, SubjectPrefix};
///
/// let mut order = Order { id: 7, events: EventBuffer::at_version(3) };
/// order.record(OrderPlaced { order_id: 7 })?;
/// order.record(OrderPlaced { order_id: 7 })?;
///
/// let changes = AggregateChanges::of(&order, &MessageContext::new(), &SubjectPrefix::default());
/// assert_eq!((changes.expected_version, changes.new_version), (3, 5));
/// assert_eq!(changes.messages.iter().map(|m| m.sequence).collect::<Vec<_>>(), [4, 5]);
///
/// // ... write state and messages in one transaction, commit, then:
/// order.events_mut().mark_saved(changes.new_version);
/// assert_eq!(order.version(), 5);
/// # Ok::<(), txoutbox_core::RecordError>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AggregateChanges {
    /// The aggregate type.
    pub aggregate_type: &'static str,
    /// The aggregate id.
    pub aggregate_id: String,
    /// The version the stored row must still have (0: it must not exist yet).
    pub expected_version: u64,
    /// The version to store.
    pub new_version: u64,
    /// The recorded events as messages, in sequence order.
    pub messages: Vec<OutboxMessage>,
}

impl AggregateChanges {
    /// Seals the aggregate's recorded events without changing the aggregate,
    /// so a failed commit leaves it as it was.
    pub fn of<A: AggregateRoot>(
        aggregate: &A,
        context: &MessageContext,
        prefix: &SubjectPrefix,
    ) -> Self {
        let aggregate_id = aggregate.aggregate_id();
        let expected_version = aggregate.version();
        let pending = aggregate.events().pending();
        let messages = (expected_version + 1..)
            .zip(pending)
            .map(|(sequence, message)| {
                let owner = AggregateRef {
                    aggregate_type: A::AGGREGATE_TYPE.to_owned(),
                    aggregate_id: aggregate_id.clone(),
                    sequence,
                };
                OutboxMessage::seal(message.clone(), owner, context, prefix)
            })
            .collect();
        Self {
            aggregate_type: A::AGGREGATE_TYPE,
            aggregate_id,
            expected_version,
            new_version: expected_version + (pending.len() as u64).max(1),
            messages,
        }
    }
}
