#[derive(serde::Serialize, serde::Deserialize, txoutbox_core::IntegrationEvent)]
#[event(name = 42)]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
