use std::fmt;

use txoutbox::events::{AggregateChanges, SubjectPrefix};
use txoutbox::{AggregateRoot, EventBuffer, MessageContext};

#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "ui.order.placed")]
struct OrderPlaced {
    order_id: u64,
}

/// A `u64` id.
#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: u64,
    events: txoutbox::EventBuffer,
}

/// A newtype id with its own `Display`.
struct InvoiceNumber(u32);

impl fmt::Display for InvoiceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "INV-{:05}", self.0)
    }
}

/// The id and the buffer anywhere among other fields; attributes split.
#[derive(AggregateRoot)]
#[aggregate(type = "billing.invoice")]
#[aggregate(crate = "txoutbox")]
struct Invoice {
    lines: Vec<u64>,
    #[aggregate(events)]
    recorded: EventBuffer,
    #[aggregate(id)]
    number: InvoiceNumber,
}

/// A second `EventBuffer` is fine once the aggregate's own one is marked.
#[derive(AggregateRoot)]
#[aggregate(type = "cart")]
struct Cart {
    #[aggregate(id)]
    id: String,
    #[aggregate(events)]
    events: EventBuffer,
    scratch: EventBuffer,
}

fn main() {
    let mut order = Order { id: 7, events: EventBuffer::at_version(2) };
    order.record(OrderPlaced { order_id: 7 }).expect("records");
    assert_eq!(Order::AGGREGATE_TYPE, "order");
    assert_eq!(order.aggregate_id(), "7");
    assert_eq!(order.version(), 2);
    let changes = AggregateChanges::of(&order, &MessageContext::new(), &SubjectPrefix::default());
    assert_eq!((changes.aggregate_type, changes.aggregate_id.as_str()), ("order", "7"));
    assert_eq!(changes.messages.len(), 1);
    assert_eq!(changes.messages[0].sequence, 3);
    order.events_mut().mark_saved(changes.new_version);
    assert_eq!(order.version(), 3);

    let mut invoice = Invoice {
        lines: vec![1, 2],
        recorded: EventBuffer::new(),
        number: InvoiceNumber(42),
    };
    assert_eq!(Invoice::AGGREGATE_TYPE, "billing.invoice");
    assert_eq!(invoice.aggregate_id(), "INV-00042");
    invoice.record(OrderPlaced { order_id: 1 }).expect("records");
    assert_eq!(invoice.recorded.pending().len(), 1);
    assert_eq!(invoice.lines.len(), 2);

    let mut cart = Cart {
        id: "c-1".into(),
        events: EventBuffer::new(),
        scratch: EventBuffer::new(),
    };
    cart.record(OrderPlaced { order_id: 2 }).expect("records");
    assert_eq!(cart.aggregate_id(), "c-1");
    assert_eq!(cart.events.pending().len(), 1);
    assert!(cart.scratch.pending().is_empty());
}
