#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order")]
struct Order(String, txoutbox::EventBuffer);

fn main() {}
