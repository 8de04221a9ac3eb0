#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.created")]
struct OrderCreated {
    total: u64,
}

#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed", version = 2, upcast_from = OrderCreated)]
struct OrderPlaced {
    total_cents: u64,
}

impl From<OrderCreated> for OrderPlaced {
    fn from(created: OrderCreated) -> Self {
        OrderPlaced {
            total_cents: created.total * 100,
        }
    }
}

fn main() {}
