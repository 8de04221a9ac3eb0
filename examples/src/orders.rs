//! The orders domain: an aggregate and the events it records. Nothing here
//! knows about databases or brokers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use txoutbox::events::RecordError;
use txoutbox::{AggregateRoot, EventBuffer, IntegrationEvent};

/// An order was placed (version 2: totals in cents with a currency).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, IntegrationEvent)]
#[event(name = "order.placed", version = 2, upcast_from = OrderPlacedV1)]
pub struct OrderPlaced {
    /// The order.
    pub order_id: String,
    /// The customer.
    pub customer: String,
    /// Total in cents.
    pub total_cents: u64,
    /// ISO 4217 currency code.
    pub currency: String,
}

/// The first version of `order.placed`, still found in old messages: whole
/// euros, no currency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, IntegrationEvent)]
#[event(name = "order.placed", version = 1)]
pub struct OrderPlacedV1 {
    /// The order.
    pub order_id: String,
    /// The customer.
    pub customer: String,
    /// Total in whole euros.
    pub total: u64,
}

impl From<OrderPlacedV1> for OrderPlaced {
    fn from(v1: OrderPlacedV1) -> Self {
        Self {
            order_id: v1.order_id,
            customer: v1.customer,
            total_cents: v1.total * 100,
            currency: "EUR".to_owned(),
        }
    }
}

/// An order was paid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, IntegrationEvent)]
#[event(name = "order.paid")]
pub struct OrderPaid {
    /// The order.
    pub order_id: String,
    /// Amount paid, in cents.
    pub amount_cents: u64,
}

/// An order left the warehouse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, IntegrationEvent)]
#[event(name = "order.shipped")]
pub struct OrderShipped {
    /// The order.
    pub order_id: String,
    /// The carrier.
    pub carrier: String,
}

/// An order was cancelled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, IntegrationEvent)]
#[event(name = "order.cancelled")]
pub struct OrderCancelled {
    /// The order.
    pub order_id: String,
    /// Why.
    pub reason: String,
}

/// Where an order is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderStatus {
    /// Placed, not paid.
    Placed,
    /// Paid, not shipped.
    Paid,
    /// On its way.
    Shipped,
    /// Cancelled.
    Cancelled,
}

impl OrderStatus {
    /// The status as stored in tables: `placed`, `paid`, `shipped`, `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Placed => "placed",
            Self::Paid => "paid",
            Self::Shipped => "shipped",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parses [`as_str`](Self::as_str)'s output.
    pub fn parse(status: &str) -> Option<Self> {
        Some(match status {
            "placed" => Self::Placed,
            "paid" => Self::Paid,
            "shipped" => Self::Shipped,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }
}

/// A rule of the order's life was broken.
#[derive(Debug, thiserror::Error)]
pub enum OrderError {
    /// The transition is not allowed from the current status.
    #[error("cannot {action} an order that is {status:?}")]
    InvalidTransition {
        /// What was attempted.
        action: &'static str,
        /// The status it was in.
        status: OrderStatus,
    },
    /// The event could not be recorded.
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// The order aggregate.
#[derive(Debug, AggregateRoot)]
#[aggregate(type = "order")]
pub struct Order {
    #[aggregate(id)]
    id: String,
    total_cents: u64,
    status: OrderStatus,
    events: EventBuffer,
}

impl Order {
    /// Places a new order.
    pub fn place(
        id: impl Into<String>,
        customer: impl Into<String>,
        total_cents: u64,
    ) -> Result<Self, OrderError> {
        let id = id.into();
        let mut order = Self {
            id: id.clone(),
            total_cents,
            status: OrderStatus::Placed,
            events: EventBuffer::new(),
        };
        order.record(OrderPlaced {
            order_id: id,
            customer: customer.into(),
            total_cents,
            currency: "EUR".to_owned(),
        })?;
        Ok(order)
    }

    /// Records the payment of the full total.
    pub fn pay(&mut self) -> Result<(), OrderError> {
        self.transition("pay", OrderStatus::Placed, OrderStatus::Paid)?;
        let event = OrderPaid {
            order_id: self.id.clone(),
            amount_cents: self.total_cents,
        };
        Ok(self.record(event)?)
    }

    /// Ships a paid order.
    pub fn ship(&mut self, carrier: impl Into<String>) -> Result<(), OrderError> {
        self.transition("ship", OrderStatus::Paid, OrderStatus::Shipped)?;
        let event = OrderShipped {
            order_id: self.id.clone(),
            carrier: carrier.into(),
        };
        Ok(self.record(event)?)
    }

    /// Cancels an order that has not shipped.
    pub fn cancel(&mut self, reason: impl Into<String>) -> Result<(), OrderError> {
        if matches!(self.status, OrderStatus::Shipped | OrderStatus::Cancelled) {
            return Err(OrderError::InvalidTransition {
                action: "cancel",
                status: self.status,
            });
        }
        self.status = OrderStatus::Cancelled;
        let event = OrderCancelled {
            order_id: self.id.clone(),
            reason: reason.into(),
        };
        Ok(self.record(event)?)
    }

    /// The current status.
    pub fn status(&self) -> OrderStatus {
        self.status
    }

    /// The order's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The total, in cents.
    pub fn total_cents(&self) -> u64 {
        self.total_cents
    }

    /// Rebuilds an order from stored state (no events recorded; `events`
    /// carries the stored version). Used by the persistence mapping.
    pub fn restore(id: String, total_cents: u64, status: OrderStatus, events: EventBuffer) -> Self {
        Self {
            id,
            total_cents,
            status,
            events,
        }
    }

    fn transition(
        &mut self,
        action: &'static str,
        from: OrderStatus,
        to: OrderStatus,
    ) -> Result<(), OrderError> {
        if self.status != from {
            return Err(OrderError::InvalidTransition {
                action,
                status: self.status,
            });
        }
        self.status = to;
        Ok(())
    }
}
