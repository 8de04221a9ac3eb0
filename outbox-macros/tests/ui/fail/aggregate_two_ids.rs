use txoutbox_core::EventBuffer;

#[derive(txoutbox_core::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: String,
    #[aggregate(id)]
    number: u64,
    events: EventBuffer,
}

fn main() {}
