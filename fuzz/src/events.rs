//! Event types registered the way services register theirs (the derive),
//! with versions and upcasts: the registry the targets decode with.

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use txoutbox_core::{AggregateRoot, EventBuffer, EventRegistry, IntegrationEvent};

/// `shop.order.placed` v1: a total in whole units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, IntegrationEvent)]
#[event(crate = "txoutbox_core", name = "shop.order.placed")]
pub struct OrderPlacedV1 {
    /// The order.
    pub order_id: u64,
    /// The total, in whole units.
    pub total: u64,
}

/// `shop.order.placed` v2: cents and a currency, upcast from v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, IntegrationEvent)]
#[event(crate = "txoutbox_core", name = "shop.order.placed", version = 2, upcast_from = OrderPlacedV1)]
pub struct OrderPlacedV2 {
    /// The order.
    pub order_id: u64,
    /// The total, in cents.
    pub total_cents: u64,
    /// ISO 4217 code.
    pub currency: String,
}

impl From<OrderPlacedV1> for OrderPlacedV2 {
    fn from(v1: OrderPlacedV1) -> Self {
        Self {
            order_id: v1.order_id,
            total_cents: v1.total.saturating_mul(100),
            currency: "EUR".to_owned(),
        }
    }
}

/// `shop.order.placed` v3: order lines and an optional note, upcast from v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, IntegrationEvent)]
#[event(crate = "txoutbox_core", name = "shop.order.placed", version = 3, upcast_from = OrderPlacedV2)]
pub struct OrderPlacedV3 {
    /// The order.
    pub order_id: u64,
    /// The total, in cents.
    pub total_cents: u64,
    /// ISO 4217 code.
    pub currency: String,
    /// What was ordered.
    #[serde(default)]
    pub lines: Vec<Line>,
    /// A note from the customer.
    #[serde(default)]
    pub note: Option<String>,
}

impl From<OrderPlacedV2> for OrderPlacedV3 {
    fn from(v2: OrderPlacedV2) -> Self {
        Self {
            order_id: v2.order_id,
            total_cents: v2.total_cents,
            currency: v2.currency,
            lines: Vec::new(),
            note: None,
        }
    }
}

/// One line of an order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Line {
    /// The article.
    pub sku: String,
    /// How many.
    pub quantity: u32,
    /// The unit price in cents.
    pub unit_cents: i64,
}

/// `shop.order.cancelled`: an enum written with an internal tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, IntegrationEvent)]
#[event(crate = "txoutbox_core", name = "shop.order.cancelled")]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum OrderCancelled {
    /// The customer asked.
    Customer {
        /// The order.
        order_id: u64,
        /// Their words.
        comment: Option<String>,
    },
    /// Payment never arrived.
    Unpaid {
        /// The order.
        order_id: u64,
        /// Days waited.
        days: u16,
    },
    /// Staff cancelled it.
    Staff {
        /// The order.
        order_id: u64,
    },
}

/// `shop.catalog.tree`: a recursive payload (its schema refers to itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, IntegrationEvent)]
#[event(crate = "txoutbox_core", name = "shop.catalog.tree")]
pub struct CatalogTree {
    /// The root category.
    pub root: Node,
}

/// A category of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Node {
    /// Its name.
    pub label: String,
    /// Its subcategories.
    pub children: Vec<Node>,
    /// The category shown after it, if any.
    pub next: Option<Box<Node>>,
}

/// `shop.audit`: on a fixed subject, `audit.shop`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, IntegrationEvent)]
#[event(crate = "txoutbox_core", name = "shop.audit", subject = "audit.shop")]
pub struct Audit {
    /// Who.
    pub actor: String,
    /// What.
    pub action: String,
}

/// An order: the aggregate the seed messages are recorded on.
#[derive(AggregateRoot)]
#[aggregate(crate = "txoutbox_core", type = "order")]
pub struct Order {
    /// Its id.
    #[aggregate(id)]
    pub id: String,
    /// Its recorded events.
    pub events: EventBuffer,
}

/// The registry of every type above, built once.
pub fn registry() -> &'static EventRegistry {
    static REGISTRY: OnceLock<EventRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        EventRegistry::builder()
            .register::<OrderPlacedV3>()
            .register::<OrderCancelled>()
            .register::<CatalogTree>()
            .register::<Audit>()
            .build()
            .expect("the fuzz events form a valid registry")
    })
}
