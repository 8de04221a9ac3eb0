use txoutbox::EventBuffer;

#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: String,
    #[aggregate(id)]
    number: u64,
    events: EventBuffer,
}

fn main() {}
