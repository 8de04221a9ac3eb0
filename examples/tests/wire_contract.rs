//! The orders events' wire contract, locked in `examples/events.lock.json`:
//! a published (name, version) that changes incompatibly fails here (see
//! the guide's chapter `txoutbox::guide::versioning`).

use txoutbox::EventRegistry;
use txoutbox::schema::SchemaLock;
use txoutbox_examples::orders::{OrderCancelled, OrderPaid, OrderPlaced, OrderShipped};

#[test]
fn the_orders_wire_contract_holds() {
    let registry = EventRegistry::builder()
        .register::<OrderPlaced>() // and v1, which it upcasts from
        .register::<OrderPaid>()
        .register::<OrderShipped>()
        .register::<OrderCancelled>()
        .build()
        .expect("the orders events register");
    SchemaLock::new(concat!(env!("CARGO_MANIFEST_DIR"), "/events.lock.json")).assert(&registry);
}
