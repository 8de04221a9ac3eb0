use txoutbox::EventBuffer;

#[derive(txoutbox::AggregateRoot)]
struct Order {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
}

fn main() {}
