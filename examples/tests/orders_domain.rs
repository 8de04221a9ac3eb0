//! The example orders domain records exactly the events its rules allow.

use txoutbox::{AggregateRoot, EventRegistry};
use txoutbox_examples::orders::{Order, OrderError, OrderPaid, OrderPlaced, OrderStatus};

#[test]
fn a_full_life_records_placed_paid_shipped() {
    let mut order = Order::place("o-1", "ada", 990).unwrap();
    order.pay().unwrap();
    order.ship("DHL").unwrap();
    let names: Vec<_> = order
        .events()
        .pending()
        .iter()
        .map(|m| m.event_name())
        .collect();
    assert_eq!(names, ["order.placed", "order.paid", "order.shipped"]);
    assert_eq!(order.status(), OrderStatus::Shipped);

    let registry = EventRegistry::from_inventory().unwrap();
    let paid = &order.events().pending()[1];
    let event: OrderPaid = registry
        .decode_as(
            paid.event_name(),
            paid.event_version(),
            paid.payload().as_bytes(),
        )
        .unwrap();
    assert_eq!(event.amount_cents, 990);
}

#[test]
fn a_refused_transition_records_nothing() {
    let mut order = Order::place("o-2", "grace", 100).unwrap();
    order.cancel("changed mind").unwrap();
    let before = order.events().pending().len();
    assert!(matches!(
        order.pay(),
        Err(OrderError::InvalidTransition { action: "pay", .. })
    ));
    assert!(matches!(
        order.cancel("again"),
        Err(OrderError::InvalidTransition { .. })
    ));
    assert_eq!(order.events().pending().len(), before);
}

#[test]
fn old_placed_messages_upcast_to_the_current_version() {
    let registry = EventRegistry::from_inventory().unwrap();
    let placed: OrderPlaced = registry
        .decode_as(
            "order.placed",
            1,
            br#"{"order_id":"o-3","customer":"x","total":2}"#,
        )
        .unwrap();
    assert_eq!((placed.total_cents, placed.currency.as_str()), (200, "EUR"));
}
