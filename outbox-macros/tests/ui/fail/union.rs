#[derive(txoutbox::IntegrationEvent)]
#[event(name = "order.placed")]
union OrderPlaced {
    order_id: u64,
    total: f64,
}

fn main() {}
