use txoutbox_core::EventBuffer;

#[derive(txoutbox_core::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
    audit: txoutbox_core::EventBuffer,
}

fn main() {}
