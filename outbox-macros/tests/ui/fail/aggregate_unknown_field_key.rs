use txoutbox_core::EventBuffer;

#[derive(txoutbox_core::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(key)]
    id: String,
    events: EventBuffer,
}

fn main() {}
