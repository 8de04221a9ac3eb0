use std::fmt::Display;

use txoutbox::{AggregateRoot, EventBuffer};

#[derive(serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "ui.item.added")]
struct ItemAdded {
    item: String,
}

/// Generic over the id (it gets a `Display` bound) and over the state.
#[derive(AggregateRoot)]
#[aggregate(type = "basket")]
struct Basket<Id, S: Clone>
where
    S: Default,
{
    #[aggregate(id)]
    id: Id,
    state: S,
    events: EventBuffer,
}

/// A lifetime parameter: an aggregate borrowing its id.
#[derive(AggregateRoot)]
#[aggregate(type = "view")]
struct View<'a> {
    #[aggregate(id)]
    id: &'a str,
    events: EventBuffer,
}

fn id_of<A: AggregateRoot>(aggregate: &A) -> String {
    aggregate.aggregate_id()
}

fn generic_id<Id: Display>(id: Id) -> String {
    let basket = Basket { id, state: 0u8, events: EventBuffer::new() };
    assert_eq!(basket.state, 0);
    id_of(&basket)
}

fn main() {
    let mut basket = Basket { id: 9u64, state: vec![1u8], events: EventBuffer::new() };
    basket.record(ItemAdded { item: "pen".into() }).expect("records");
    assert_eq!(Basket::<u64, Vec<u8>>::AGGREGATE_TYPE, "basket");
    assert_eq!(basket.aggregate_id(), "9");
    assert_eq!(basket.take_events().len(), 1);
    assert_eq!(basket.state, [1]);
    assert_eq!(generic_id("b-1"), "b-1");

    let name = String::from("v-1");
    let view = View { id: &name, events: EventBuffer::new() };
    assert_eq!(id_of(&view), "v-1");
}
