#[derive(txoutbox_core::AggregateRoot)]
#[aggregate(type = "order")]
struct Order(String, txoutbox_core::EventBuffer);

fn main() {}
