#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed", version = -1)]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
