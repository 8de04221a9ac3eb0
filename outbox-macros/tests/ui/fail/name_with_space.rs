#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order placed")]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
