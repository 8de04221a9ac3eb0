#[derive(serde::Serialize, txoutbox_core::IntegrationEvent)]
#[event(name = "order.placed")]
struct OrderPlaced {
    order_id: u64,
}

fn main() {}
