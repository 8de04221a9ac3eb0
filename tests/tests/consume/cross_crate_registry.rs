//! Registrations made by the derive in another crate (`sample-events`) are
//! found here, through `inventory` and through explicit registration.

use sample_events::{OrderCancelled, OrderPlaced, OrderPlacedV1, OrderPlacedV2};
use txoutbox_core::{EventRegistry, EventSubject, IntegrationEvent, SubjectPrefix};

#[test]
fn inventory_finds_the_other_crates_events() {
    let registry = EventRegistry::from_inventory().expect("valid registry");
    assert!(registry.contains::<OrderPlacedV1>());
    assert!(registry.contains::<OrderPlacedV2>());
    assert!(registry.contains::<OrderPlaced>());
    assert!(registry.contains::<OrderCancelled>());
    assert_eq!(registry.versions("order.placed"), [1, 2, 3]);
    let found: Vec<&str> = registry.iter().map(|r| r.rust_type()).collect();
    assert!(found.contains(&"sample_events::OrderPlaced"), "{found:?}");
}

#[test]
fn explicit_registration_covers_the_upcast_chain() {
    // What a consumer does to be immune to the linker dropping a crate.
    let registry = EventRegistry::builder()
        .register::<OrderPlaced>()
        .build()
        .expect("valid registry");
    assert_eq!(registry.len(), 3, "v3 brings v2 and v1 along");
}

#[test]
fn messages_of_every_version_reach_the_newest_type() {
    let registry = EventRegistry::from_inventory().expect("valid registry");
    let from_v1: OrderPlaced = registry
        .decode_as("order.placed", 1, br#"{"order_id":"o-1","total":12}"#)
        .expect("v1 upcasts");
    assert_eq!(
        from_v1,
        OrderPlaced {
            order_id: "o-1".into(),
            total_cents: 1200,
            currency: "EUR".into()
        }
    );
    let from_v3: OrderPlaced = registry
        .decode_as(
            "order.placed",
            3,
            br#"{"order_id":"o-2","total_cents":5,"currency":"USD"}"#,
        )
        .expect("v3 decodes");
    assert_eq!(from_v3.currency, "USD");
}

#[test]
fn an_enum_is_one_event_with_serde_deciding_variants() {
    assert_eq!(OrderCancelled::NAME, "order.cancelled");
    assert_eq!(
        OrderCancelled::SUBJECT,
        EventSubject::Fixed("orders.cancellations")
    );
    assert_eq!(
        OrderCancelled::subject(&SubjectPrefix::default()),
        "orders.cancellations"
    );
    let registry = EventRegistry::from_inventory().expect("valid registry");
    let event: OrderCancelled = registry
        .decode_as(
            "order.cancelled",
            1,
            br#"{"reason":"payment_timeout","order_id":"o-3","waited_secs":60}"#,
        )
        .expect("tagged variant decodes");
    assert_eq!(
        event,
        OrderCancelled::PaymentTimeout {
            order_id: "o-3".into(),
            waited_secs: 60
        }
    );
}
