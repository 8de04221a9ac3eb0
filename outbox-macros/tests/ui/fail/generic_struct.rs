#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed")]
struct OrderPlaced<T> {
    order_id: T,
}

fn main() {}
