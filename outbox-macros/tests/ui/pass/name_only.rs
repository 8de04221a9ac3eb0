use txoutbox::events::{EventSubject, SubjectPrefix};
use txoutbox::{EventRegistry, IntegrationEvent};

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed")]
struct OrderPlaced {
    order_id: u64,
}

fn main() {
    assert_eq!(OrderPlaced::NAME, "order.placed");
    assert_eq!(OrderPlaced::VERSION, 1);
    assert_eq!(OrderPlaced::SUBJECT, EventSubject::Derived);
    assert_eq!(
        OrderPlaced::subject(&SubjectPrefix::default()),
        "events.order.placed"
    );

    let registry = EventRegistry::from_inventory().expect("valid registry");
    assert!(registry.contains::<OrderPlaced>());
    let event: OrderPlaced = registry
        .decode_as("order.placed", 1, br#"{"order_id":7}"#)
        .expect("decodes");
    assert_eq!(event, OrderPlaced { order_id: 7 });
}
