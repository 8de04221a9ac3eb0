#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(version = 2)]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
