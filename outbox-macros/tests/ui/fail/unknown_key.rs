#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed", topic = "orders")]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
