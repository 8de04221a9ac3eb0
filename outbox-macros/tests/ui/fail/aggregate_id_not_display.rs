use txoutbox::EventBuffer;

struct OrderId(u64);

#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: OrderId,
    events: EventBuffer,
}

fn main() {}
