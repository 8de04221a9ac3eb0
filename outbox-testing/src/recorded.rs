//! What an aggregate recorded, typed: for domain tests that need no store.

use txoutbox_core::{AggregateRoot, IntegrationEvent, OutboxMessage};

use crate::typed::events_of;

/// The events of type `E` that `aggregate` recorded and has not saved yet,
/// in the order it recorded them.
///
/// ```
/// # use txoutbox_core::{AggregateRoot, EventBuffer, IntegrationEvent};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
/// # #[event(name = "doc.recorded.order.paid")]
/// # struct OrderPaid { cents: u64 }
/// # #[derive(AggregateRoot)]
/// # #[aggregate(type = "order")]
/// # struct Order { #[aggregate(id)] id: u64, events: EventBuffer }
/// let mut order = Order { id: 1, events: EventBuffer::new() };
/// order.record(OrderPaid { cents: 300 })?;
/// assert_eq!(txoutbox_testing::recorded::<OrderPaid>(&order), [OrderPaid { cents: 300 }]);
/// # Ok::<(), txoutbox_core::RecordError>(())
/// ```
///
/// # Panics
/// When a recorded message of `E`'s name does not decode into `E`.
pub fn recorded<E: IntegrationEvent>(aggregate: &impl AggregateRoot) -> Vec<E> {
    let changes = txoutbox_core::AggregateChanges::of(
        aggregate,
        &txoutbox_core::MessageContext::new(),
        &txoutbox_core::SubjectPrefix::default(),
    );
    let messages: Vec<OutboxMessage> = changes.messages;
    events_of::<E>(messages)
        .into_iter()
        .map(|p| p.event)
        .collect()
}
