#[derive(serde::Serialize, serde::Deserialize, outbox_core::IntegrationEvent)]
#[event(name = "order.placed", version = 4294967296)]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
