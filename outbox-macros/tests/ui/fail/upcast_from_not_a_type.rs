#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed")]
struct OrderPlacedV1 {
    total: u64,
}

#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed", version = 2, upcast_from = "OrderPlacedV1")]
struct OrderPlaced {
    total_cents: u64,
}

impl From<OrderPlacedV1> for OrderPlaced {
    fn from(v1: OrderPlacedV1) -> Self {
        OrderPlaced {
            total_cents: v1.total * 100,
        }
    }
}

fn main() {}
