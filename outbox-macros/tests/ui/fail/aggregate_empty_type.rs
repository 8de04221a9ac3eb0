use txoutbox_core::EventBuffer;

#[derive(txoutbox_core::AggregateRoot)]
#[aggregate(type = "")]
struct Order {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
}

fn main() {}
