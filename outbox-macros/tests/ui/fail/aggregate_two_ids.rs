use outbox_core::EventBuffer;

#[derive(outbox_core::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: String,
    #[aggregate(id)]
    number: u64,
    events: EventBuffer,
}

fn main() {}
