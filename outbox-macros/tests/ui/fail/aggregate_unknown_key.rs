use outbox_core::EventBuffer;

#[derive(outbox_core::AggregateRoot)]
#[aggregate(type = "order", name = "order")]
struct Order {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
}

fn main() {}
