#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed", subject = "events.>")]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
