use txoutbox::{EventRegistry, IntegrationEvent};

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed", version = 1)]
struct OrderPlacedV1 {
    total: u64,
}

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed", version = 2, upcast_from = OrderPlacedV1)]
struct OrderPlaced {
    total_cents: u64,
    currency: String,
}

impl From<OrderPlacedV1> for OrderPlaced {
    fn from(v1: OrderPlacedV1) -> Self {
        OrderPlaced {
            total_cents: v1.total * 100,
            currency: "EUR".to_owned(),
        }
    }
}

fn main() {
    let upcasts_from = OrderPlaced::REGISTRATION
        .upcasts_from()
        .expect("declares an upcast");
    assert_eq!(
        (upcasts_from.name(), upcasts_from.version()),
        ("order.placed", 1)
    );
    assert!(OrderPlacedV1::REGISTRATION.upcasts_from().is_none());

    let registry = EventRegistry::from_inventory().expect("valid registry");
    assert!(registry.contains::<OrderPlacedV1>());
    assert!(registry.contains::<OrderPlaced>());
    assert_eq!(registry.versions("order.placed"), vec![1, 2]);
    assert!(registry.accepts::<OrderPlaced>("order.placed", 1));

    // A message written as v1 is read as v2 through the `From` impl.
    let placed: OrderPlaced = registry
        .decode_as("order.placed", 1, br#"{"total":3}"#)
        .expect("upcasts");
    assert_eq!(
        placed,
        OrderPlaced {
            total_cents: 300,
            currency: "EUR".to_owned()
        }
    );
    // v2 payloads decode directly.
    let placed: OrderPlaced = registry
        .decode_as("order.placed", 2, br#"{"total_cents":5,"currency":"USD"}"#)
        .expect("decodes");
    assert_eq!(
        placed,
        OrderPlaced {
            total_cents: 5,
            currency: "USD".to_owned()
        }
    );

    // Registering only the newest version pulls in the older one too.
    let registry = EventRegistry::builder()
        .register::<OrderPlaced>()
        .build()
        .expect("valid registry");
    assert!(registry.contains::<OrderPlacedV1>());
}
