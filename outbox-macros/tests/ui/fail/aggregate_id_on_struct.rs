use txoutbox_core::EventBuffer;

#[derive(txoutbox_core::AggregateRoot)]
#[aggregate(type = "order", id)]
struct Order {
    id: String,
    events: EventBuffer,
}

fn main() {}
