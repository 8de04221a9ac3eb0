use outbox_core::EventBuffer;

#[derive(outbox_core::AggregateRoot)]
struct Order {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
}

fn main() {}
