#[derive(serde::Serialize, serde::Deserialize, txoutbox_core::IntegrationEvent)]
#[event(version = 2)]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
