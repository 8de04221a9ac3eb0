//! The orders demo: an `Order` aggregate records events, saving seals them
//! into outbox messages with their wire headers, and a consumer decodes them
//! back into typed events, including an old `order.placed` v1 message that is
//! upcast to v2.
//!
//! Run it with `cargo run -p outbox-examples --bin orders-demo`.

use std::error::Error;

use outbox_core::{
    AggregateChanges, AggregateRoot, EventRegistry, MessageContext, SubjectPrefix, wire,
};
use outbox_examples::orders::{Order, OrderCancelled, OrderPaid, OrderPlaced, OrderShipped};

fn main() -> Result<(), Box<dyn Error>> {
    // 1. Domain code: two orders go through their lives and record events.
    let mut shipped = Order::place("o-1001", "ada", 4_990)?;
    shipped.pay()?;
    shipped.ship("DHL")?;
    let mut cancelled = Order::place("o-1002", "grace", 1_250)?;
    cancelled.cancel("customer changed their mind")?;
    if let Err(refused) = cancelled.pay() {
        println!("domain rule held: {refused}");
    }

    // 2. Saving: events become outbox messages, sequenced per aggregate.
    let context = MessageContext::new().with_correlation_id("checkout-7");
    let prefix = SubjectPrefix::new("shop")?;
    let mut outbox = Vec::new();
    for order in [&mut shipped, &mut cancelled] {
        let changes = AggregateChanges::of(&*order, &context, &prefix);
        println!(
            "saving order {} v{} -> v{} with {} event(s)",
            changes.aggregate_id,
            changes.expected_version,
            changes.new_version,
            changes.messages.len()
        );
        order.events_mut().mark_saved(changes.new_version);
        outbox.extend(changes.messages);
    }

    // 3. Publishing: each message is a CloudEvent over NATS headers.
    for message in &outbox {
        println!(
            "\n{} #{} of {} {}  ->  {}",
            message.event_name,
            message.sequence,
            message.aggregate_type,
            message.aggregate_id,
            message.subject
        );
        for (name, value) in wire::encode(message, "/orders-demo") {
            println!("    {name}: {value}");
        }
        println!("    body: {}", message.payload.as_str());
    }

    // 4. Consuming: the registry turns (name, version, bytes) into Rust types.
    let registry = EventRegistry::from_inventory()?;
    println!("\nregistry: {} event types", registry.len());
    for message in &outbox {
        let pairs: Vec<(String, String)> = wire::encode(message, "/orders-demo")
            .into_iter()
            .map(|(k, v)| (k.into_owned(), v))
            .collect();
        let received = wire::decode(
            &message.subject,
            pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            message.payload.as_bytes(),
        )?;
        match received.event_name.as_str() {
            "order.placed" => println!(
                "consumed {:?}",
                registry.decode_message::<OrderPlaced>(&received)?
            ),
            "order.paid" => println!(
                "consumed {:?}",
                registry.decode_message::<OrderPaid>(&received)?
            ),
            "order.shipped" => println!(
                "consumed {:?}",
                registry.decode_message::<OrderShipped>(&received)?
            ),
            "order.cancelled" => println!(
                "consumed {:?}",
                registry.decode_message::<OrderCancelled>(&received)?
            ),
            other => println!("no handler for {other}"),
        }
    }

    // 5. An old v1 message still reaches the v2 handler through the upcast.
    let old: OrderPlaced = registry.decode_as(
        "order.placed",
        1,
        br#"{"order_id":"o-7","customer":"linus","total":12}"#,
    )?;
    println!("upcast order.placed v1 -> {old:?}");

    // 6. Bad input is a typed error, not a panic.
    if let Err(err) = registry.decode("order.placed", 2, br#"{"order_id":17}"#) {
        println!("rejected: {err}");
    }
    Ok(())
}
