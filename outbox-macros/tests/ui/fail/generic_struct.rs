#[derive(serde::Serialize, serde::Deserialize, txoutbox_core::IntegrationEvent)]
#[event(name = "order.placed")]
struct OrderPlaced<T> {
    order_id: T,
}

fn main() {}
