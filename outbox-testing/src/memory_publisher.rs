//! [`MemoryPublisher`]: a broker in memory that stores what it is given,
//! deduplicating by message id as JetStream does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use txoutbox_core::publisher::PublishAck;
use txoutbox_core::{IntegrationEvent, MessageId, OutboxMessage, PublishError, Publisher};

use crate::order::{OrderViolation, check_order};
use crate::typed::{PublishedEvent, events_of};

/// A [`Publisher`] that stores every message it acknowledges, in the order
/// the broker would have stored them, and absorbs a re-publish of a
/// message id it holds (acked as a duplicate, stored once), like a
/// JetStream stream inside its duplicate window. Clones share the broker.
///
/// ```
/// # use txoutbox_core::{MessageContext, OutboxMessage, PendingMessage, Publisher, SubjectPrefix, IntegrationEvent};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
/// # #[event(name = "doc.payment.received")]
/// # struct PaymentReceived { cents: u64 }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use txoutbox_testing::MemoryPublisher;
///
/// let publisher = MemoryPublisher::new();
/// let message = OutboxMessage::standalone(
///     PendingMessage::new(&PaymentReceived { cents: 5 })?,
///     &MessageContext::new(),
///     &SubjectPrefix::default(),
/// );
/// publisher.publish(&message).await?;
/// let again = publisher.publish(&message).await?; // a re-publish
/// assert!(again.duplicate);
///
/// let received = publisher.events::<PaymentReceived>();
/// assert_eq!(received, [PaymentReceived { cents: 5 }]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryPublisher {
    broker: Arc<Mutex<Broker>>,
}

#[derive(Debug, Default)]
struct Broker {
    stored: Vec<OutboxMessage>,
    sequences: HashMap<MessageId, u64>,
    publishes: u64,
}

impl MemoryPublisher {
    /// An empty broker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every stored message, in the order it was stored (each id once).
    pub fn messages(&self) -> Vec<OutboxMessage> {
        self.broker().stored.clone()
    }

    /// The stored messages of `E`'s event name, decoded, with their
    /// envelopes, in stored order.
    ///
    /// # Panics
    /// When a message of that name does not decode into `E`.
    pub fn published<E: IntegrationEvent>(&self) -> Vec<PublishedEvent<E>> {
        events_of(self.messages())
    }

    /// The stored events of type `E`, in stored order.
    ///
    /// # Panics
    /// When a message of that name does not decode into `E`.
    pub fn events<E: IntegrationEvent>(&self) -> Vec<E> {
        self.published::<E>().into_iter().map(|p| p.event).collect()
    }

    /// The stored messages of one aggregate, in stored order.
    pub fn of_aggregate(&self, aggregate_type: &str, aggregate_id: &str) -> Vec<OutboxMessage> {
        self.broker()
            .stored
            .iter()
            .filter(|m| m.aggregate_type == aggregate_type && m.aggregate_id == aggregate_id)
            .cloned()
            .collect()
    }

    /// How many publishes the broker received, re-publishes included.
    pub fn publishes(&self) -> u64 {
        self.broker().publishes
    }

    /// How many publishes were re-publishes it absorbed.
    pub fn duplicates(&self) -> u64 {
        let broker = self.broker();
        broker.publishes - broker.stored.len() as u64
    }

    /// Checks that every aggregate's messages were stored in sequence
    /// order, each once, with no gap between consecutive ones.
    pub fn check_order(&self) -> Result<(), OrderViolation> {
        check_order(&self.broker().stored)
    }

    /// Panics, naming the aggregate and sequences, unless
    /// [`check_order`](MemoryPublisher::check_order) passes.
    pub fn assert_in_order(&self) {
        if let Err(violation) = self.check_order() {
            panic!("{violation}");
        }
    }

    fn broker(&self) -> MutexGuard<'_, Broker> {
        self.broker.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Publisher for MemoryPublisher {
    async fn publish(&self, message: &OutboxMessage) -> Result<PublishAck, PublishError> {
        let mut broker = self.broker();
        broker.publishes += 1;
        if let Some(&sequence) = broker.sequences.get(&message.id) {
            return Ok(PublishAck::new(Some(sequence), true));
        }
        broker.stored.push(message.clone());
        let sequence = broker.stored.len() as u64;
        broker.sequences.insert(message.id, sequence);
        Ok(PublishAck::new(Some(sequence), false))
    }
}
