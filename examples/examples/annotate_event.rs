//! Step 1: annotate an event. No servers needed.
//!
//! `cargo run -p txoutbox-examples --example annotate_event`
//!
//! An integration event is a plain serde struct with
//! `#[derive(IntegrationEvent)]`: a stable wire name, a schema version and a
//! NATS subject. When the payload changes shape, bump the version and say
//! how old messages become new ones (`upcast_from` + `From`).

use std::error::Error;

use serde::{Deserialize, Serialize};
use txoutbox::events::SubjectPrefix;
use txoutbox::{EventRegistry, IntegrationEvent};

/// Version 2 of `invoice.issued`: amounts in cents. Old v1 messages are
/// upcast through `From<InvoiceIssuedV1>`.
#[derive(Debug, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "invoice.issued", version = 2, upcast_from = InvoiceIssuedV1)]
struct InvoiceIssued {
    invoice_id: String,
    amount_cents: u64,
}

/// Version 1, still found in old messages: whole euros.
#[derive(Debug, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "invoice.issued", version = 1)]
struct InvoiceIssuedV1 {
    invoice_id: String,
    amount: u64,
}

impl From<InvoiceIssuedV1> for InvoiceIssued {
    fn from(v1: InvoiceIssuedV1) -> Self {
        Self {
            invoice_id: v1.invoice_id,
            amount_cents: v1.amount * 100,
        }
    }
}

/// An event with a fixed subject, whatever prefix the outbox is configured with.
#[derive(Debug, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "audit.login", subject = "audit.logins")]
struct UserLoggedIn {
    user: String,
}

fn main() -> Result<(), Box<dyn Error>> {
    txoutbox_examples::support::exit_on_help(include_str!("annotate_event.rs"));
    // Name, version and subject are constants of the type.
    let prefix = SubjectPrefix::new("billing")?;
    println!(
        "{} v{} -> subject {}",
        InvoiceIssued::NAME,
        InvoiceIssued::VERSION,
        InvoiceIssued::subject(&prefix)
    );
    println!(
        "{} v{} -> subject {} (fixed)",
        UserLoggedIn::NAME,
        UserLoggedIn::VERSION,
        UserLoggedIn::subject(&prefix)
    );

    // Consumers decode (name, version, bytes) back into the Rust type; every
    // derived event is registered automatically.
    let registry = EventRegistry::from_inventory()?;
    println!(
        "versions of invoice.issued: {:?}",
        registry.versions("invoice.issued")
    );
    let current: InvoiceIssued = registry.decode_as(
        "invoice.issued",
        2,
        br#"{"invoice_id":"inv-2","amount_cents":1250}"#,
    )?;
    println!("v2 message  -> {current:?}");
    let upcast: InvoiceIssued = registry.decode_as(
        "invoice.issued",
        1,
        br#"{"invoice_id":"inv-1","amount":12}"#,
    )?;
    println!("v1 message  -> {upcast:?} (upcast)");

    // A payload that does not fit is an error, not a panic.
    if let Err(err) = registry.decode_as::<InvoiceIssued>("invoice.issued", 2, br#"{"x":1}"#) {
        println!("bad payload -> {err}");
    }
    Ok(())
}
