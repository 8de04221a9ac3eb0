#[derive(serde::Serialize, serde::Deserialize, outbox_core::IntegrationEvent)]
#[event(name = "order.placed")]
struct OrderPlaced<T> {
    order_id: T,
}

fn main() {}
