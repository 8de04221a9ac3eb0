use outbox_core::EventBuffer;

#[derive(outbox_core::AggregateRoot)]
#[aggregate(type = "order", id)]
struct Order {
    id: String,
    events: EventBuffer,
}

fn main() {}
