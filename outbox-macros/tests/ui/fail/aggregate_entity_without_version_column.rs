use outbox_core::EventBuffer;

#[derive(outbox_core::AggregateRoot)]
#[aggregate(type = "order", entity = "Entity")]
struct Model {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
}

fn main() {}
