#[derive(outbox_core::AggregateRoot)]
#[aggregate(type = "order")]
struct Order(String, outbox_core::EventBuffer);

fn main() {}
