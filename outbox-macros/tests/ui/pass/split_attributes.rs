use txoutbox::events::EventSubject;
use txoutbox::{EventRegistry, IntegrationEvent};

// Keys may be spread over several `#[event(...)]` attributes, interleaved
// with other attributes, and one attribute may span several lines.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "stock.reserved")]
#[serde(deny_unknown_fields)]
#[event(
    version = 4,
    subject = "inventory.warehouse-eu-central-1.stock-reservations.confirmed-by-picker"
)]
struct StockReserved {
    sku: String,
    quantity: u32,
}

const SUBJECT: &str = "inventory.warehouse-eu-central-1.stock-reservations.confirmed-by-picker";

fn main() {
    assert_eq!(StockReserved::NAME, "stock.reserved");
    assert_eq!(StockReserved::VERSION, 4);
    assert_eq!(StockReserved::SUBJECT, EventSubject::Fixed(SUBJECT));

    let registry = EventRegistry::from_inventory().expect("valid registry");
    assert!(registry.contains::<StockReserved>());
    let event: StockReserved = registry
        .decode_as("stock.reserved", 4, br#"{"sku":"A-1","quantity":2}"#)
        .expect("decodes");
    assert_eq!(
        event,
        StockReserved {
            sku: "A-1".to_owned(),
            quantity: 2
        }
    );
}
