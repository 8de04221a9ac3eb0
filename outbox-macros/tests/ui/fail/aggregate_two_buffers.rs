use txoutbox::EventBuffer;

#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
    audit: txoutbox::EventBuffer,
}

fn main() {}
