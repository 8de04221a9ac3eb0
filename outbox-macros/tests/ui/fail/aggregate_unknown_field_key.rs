use txoutbox::EventBuffer;

#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(key)]
    id: String,
    events: EventBuffer,
}

fn main() {}
