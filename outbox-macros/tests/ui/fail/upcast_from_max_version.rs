// The version check must not overflow when the previous version is u32::MAX.
#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed", version = 4294967295)]
struct OrderPlacedMax {
    total: u64,
}

#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed", version = 2, upcast_from = OrderPlacedMax)]
struct OrderPlaced {
    total_cents: u64,
}

impl From<OrderPlacedMax> for OrderPlaced {
    fn from(max: OrderPlacedMax) -> Self {
        OrderPlaced {
            total_cents: max.total * 100,
        }
    }
}

fn main() {}
