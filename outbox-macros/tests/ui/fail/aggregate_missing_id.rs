use txoutbox::EventBuffer;

#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    id: String,
    events: EventBuffer,
}

fn main() {}
