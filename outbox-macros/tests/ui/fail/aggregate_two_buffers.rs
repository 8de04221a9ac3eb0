use outbox_core::EventBuffer;

#[derive(outbox_core::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
    audit: outbox_core::EventBuffer,
}

fn main() {}
