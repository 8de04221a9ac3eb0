#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = 42)]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
