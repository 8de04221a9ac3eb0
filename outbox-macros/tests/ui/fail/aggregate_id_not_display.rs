use txoutbox_core::EventBuffer;

struct OrderId(u64);

#[derive(txoutbox_core::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: OrderId,
    events: EventBuffer,
}

fn main() {}
