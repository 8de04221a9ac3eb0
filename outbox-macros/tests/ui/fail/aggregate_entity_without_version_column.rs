use txoutbox::EventBuffer;

#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order", entity = "Entity")]
struct Model {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
}

fn main() {}
