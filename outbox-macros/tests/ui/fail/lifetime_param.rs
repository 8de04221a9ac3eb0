#[derive(serde::Serialize, serde::Deserialize, txoutbox_core::IntegrationEvent)]
#[event(name = "order.placed")]
struct OrderPlaced<'a> {
    customer: &'a str,
}

fn main() {}
