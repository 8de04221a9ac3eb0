#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "order.placed")]
struct OrderPlaced<'a> {
    customer: &'a str,
}

fn main() {}
