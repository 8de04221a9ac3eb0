use txoutbox::events::{EventSubject, SubjectPrefix};
use txoutbox::{EventRegistry, IntegrationEvent};

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.shipped", version = 3, subject = "logistics.shipments")]
struct OrderShipped {
    order_id: u64,
    carrier: String,
}

fn main() {
    assert_eq!(OrderShipped::NAME, "order.shipped");
    assert_eq!(OrderShipped::VERSION, 3);
    assert_eq!(
        OrderShipped::SUBJECT,
        EventSubject::Fixed("logistics.shipments")
    );
    let prefix = SubjectPrefix::new("shop").expect("valid prefix");
    assert_eq!(OrderShipped::subject(&prefix), "logistics.shipments");

    let registry = EventRegistry::from_inventory().expect("valid registry");
    assert!(registry.contains::<OrderShipped>());
    let registration = registry.get("order.shipped", 3).expect("registered");
    assert_eq!(
        registration.subject(),
        EventSubject::Fixed("logistics.shipments")
    );
    let event: OrderShipped = registry
        .decode_as("order.shipped", 3, br#"{"order_id":7,"carrier":"DHL"}"#)
        .expect("decodes");
    assert_eq!(
        event,
        OrderShipped {
            order_id: 7,
            carrier: "DHL".to_owned()
        }
    );
}
