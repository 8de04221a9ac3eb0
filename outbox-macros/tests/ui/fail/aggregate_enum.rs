#[derive(txoutbox::AggregateRoot)]
#[aggregate(type = "order")]
enum Order {
    Placed { id: String },
    Cancelled { id: String },
}

fn main() {}
