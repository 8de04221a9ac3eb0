use txoutbox::EventBuffer;

#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order", id)]
struct Order {
    id: String,
    events: EventBuffer,
}

fn main() {}
