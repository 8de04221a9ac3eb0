#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: String,
    total_cents: u64,
}

fn main() {}
