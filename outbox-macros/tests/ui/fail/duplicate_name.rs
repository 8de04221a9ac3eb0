#[derive(serde::Serialize, serde::Deserialize, txoutbox_core::IntegrationEvent)]
#[event(name = "order.placed")]
#[event(version = 2, name = "order.created")]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
