use txoutbox::EventBuffer;

#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order", name = "order")]
struct Order {
    #[aggregate(id)]
    id: String,
    events: EventBuffer,
}

fn main() {}
