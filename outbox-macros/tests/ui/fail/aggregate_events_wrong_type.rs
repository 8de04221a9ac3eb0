#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: String,
    #[aggregate(events)]
    events: Vec<String>,
}

fn main() {}
