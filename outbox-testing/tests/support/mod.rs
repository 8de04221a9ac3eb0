//! An order aggregate and its events, as a service would define them.

#![allow(dead_code)] // each test file uses part of it

use serde::{Deserialize, Serialize};
use txoutbox_core::{AggregateRoot, EventBuffer, IntegrationEvent, RecordError};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "kit.order.placed")]
pub(crate) struct OrderPlaced {
    pub(crate) order_id: String,
    pub(crate) cents: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "kit.order.amended")]
pub(crate) struct OrderAmended {
    pub(crate) order_id: String,
    pub(crate) cents: u64,
}

#[derive(AggregateRoot)]
#[aggregate(type = "order")]
pub(crate) struct Order {
    #[aggregate(id)]
    pub(crate) id: String,
    pub(crate) cents: u64,
    pub(crate) events: EventBuffer,
}

impl Order {
    pub(crate) fn place(id: &str, cents: u64) -> Result<Self, RecordError> {
        let mut order = Order {
            id: id.to_owned(),
            cents,
            events: EventBuffer::new(),
        };
        order.record(OrderPlaced {
            order_id: id.to_owned(),
            cents,
        })?;
        Ok(order)
    }

    pub(crate) fn amend(&mut self, cents: u64) -> Result<(), RecordError> {
        self.cents = cents;
        let order_id = self.id.clone();
        self.record(OrderAmended { order_id, cents })
    }
}
