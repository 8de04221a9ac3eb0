use txoutbox_core::EventBuffer;

#[derive(txoutbox_core::AggregateRoot)]
struct Order {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
}

fn main() {}
