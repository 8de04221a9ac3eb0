use txoutbox::{EventRegistry, IntegrationEvent};

/// The whole enum is one event: one name, one version; serde picks the shape.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "payment.changed", version = 2)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum PaymentChanged {
    Authorized { amount_cents: u64 },
    Captured { amount_cents: u64 },
    Refunded,
}

fn main() {
    assert_eq!(PaymentChanged::NAME, "payment.changed");
    assert_eq!(PaymentChanged::VERSION, 2);

    let registry = EventRegistry::from_inventory().expect("valid registry");
    assert!(registry.contains::<PaymentChanged>());
    assert_eq!(registry.versions("payment.changed"), vec![2]);
    let captured: PaymentChanged = registry
        .decode_as(
            "payment.changed",
            2,
            br#"{"kind":"captured","amount_cents":500}"#,
        )
        .expect("decodes");
    assert_eq!(captured, PaymentChanged::Captured { amount_cents: 500 });
    let refunded: PaymentChanged = registry
        .decode_as("payment.changed", 2, br#"{"kind":"refunded"}"#)
        .expect("decodes");
    assert_eq!(refunded, PaymentChanged::Refunded);
}
