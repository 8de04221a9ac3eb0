#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed")]
#[event(version = 2, name = "order.created")]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
