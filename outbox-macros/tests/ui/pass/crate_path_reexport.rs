// The generated code names `txoutbox` only through the `crate` key here,
// as a crate that re-exports outbox-core to its users would write it.
mod reexport {
    pub use txoutbox;
}

use reexport::txoutbox::{EventRegistry, IntegrationEvent};

#[derive(
    Debug, PartialEq, serde::Serialize, serde::Deserialize, reexport::txoutbox::IntegrationEvent,
)]
#[event(name = "invoice.issued", version = 2, crate = "reexport::txoutbox")]
struct InvoiceIssued {
    invoice_id: u64,
}

#[derive(
    Debug, PartialEq, serde::Serialize, serde::Deserialize, reexport::txoutbox::IntegrationEvent,
)]
#[event(name = "invoice.paid", crate = "crate::reexport::txoutbox")]
struct InvoicePaid {
    invoice_id: u64,
}

fn main() {
    assert_eq!(InvoiceIssued::NAME, "invoice.issued");
    assert_eq!(InvoiceIssued::VERSION, 2);
    assert_eq!(InvoicePaid::NAME, "invoice.paid");

    let registry = EventRegistry::from_inventory().expect("valid registry");
    assert!(registry.contains::<InvoiceIssued>());
    assert!(registry.contains::<InvoicePaid>());
    let issued: InvoiceIssued = registry
        .decode_as("invoice.issued", 2, br#"{"invoice_id":9}"#)
        .expect("decodes");
    assert_eq!(issued, InvoiceIssued { invoice_id: 9 });
}
