use txoutbox_core::EventBuffer;

#[derive(txoutbox_core::AggregateRoot)]
#[aggregate(type = "order", name = "order")]
struct Order {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
}

fn main() {}
