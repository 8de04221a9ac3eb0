use txoutbox_core::EventBuffer;

#[derive(txoutbox_core::AggregateRoot)]
#[aggregate(type = "order", entity = "Entity")]
struct Model {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
}

fn main() {}
