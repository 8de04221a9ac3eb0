//! Real messages, made the way a service makes them (events recorded on an
//! aggregate, sealed with a context under a prefix): what the seed corpus
//! is built from. Ids and times are then fixed, so the corpus written from
//! them does not change from one run of the generator to the next.

use chrono::{DateTime, Duration, Utc};
use txoutbox_core::{
    AggregateChanges, EventBuffer, MessageContext, MessageId, OutboxMessage, Partitions,
    PendingMessage, SubjectPrefix, TraceParent,
};

use crate::events::{
    Audit, CatalogTree, Line, Node, Order, OrderCancelled, OrderPlacedV1, OrderPlacedV2,
    OrderPlacedV3,
};

/// The W3C specification's example `traceparent`.
pub const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/// A `tracestate` of two vendors.
pub const TRACESTATE: &str = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";
/// The `ce-source` the seed messages are published with.
pub const SOURCE: &str = "/shop";

/// The real messages, in a fixed order.
pub fn messages() -> Vec<OutboxMessage> {
    let mut all = Vec::new();
    for group in [placed_and_cancelled(), old_producer(), catalog_and_unpaid()] {
        push_fixed(&mut all, group);
    }
    let audit = caused_audit(&all[0]);
    push_fixed(&mut all, vec![audit]);
    push_fixed(&mut all, partitioned());
    all
}

fn push_fixed(all: &mut Vec<OutboxMessage>, group: Vec<OutboxMessage>) {
    for mut message in group {
        fix(&mut message, all.len());
        all.push(message);
    }
}

/// A root message and the next of its aggregate, no context.
fn placed_and_cancelled() -> Vec<OutboxMessage> {
    let mut order = order("7");
    record(
        &mut order,
        OrderPlacedV3 {
            order_id: 7,
            total_cents: 12_50,
            currency: "EUR".into(),
            lines: vec![Line {
                sku: "tea-01".into(),
                quantity: 2,
                unit_cents: 6_25,
            }],
            note: Some("leave at the door".into()),
        },
    );
    record(
        &mut order,
        OrderCancelled::Customer {
            order_id: 7,
            comment: None,
        },
    );
    seal(&order, &MessageContext::new(), &SubjectPrefix::default())
}

/// Older versions, written by a producer not upgraded yet, with a full
/// context: correlation, tenant, trace, headers (the context's and one of
/// the message's own).
fn old_producer() -> Vec<OutboxMessage> {
    let mut order = order("kunde-ü-8");
    record(
        &mut order,
        OrderPlacedV1 {
            order_id: 8,
            total: 40,
        },
    );
    let v2 = PendingMessage::new(&OrderPlacedV2 {
        order_id: 8,
        total_cents: 40_00,
        currency: "CHF".into(),
    })
    .and_then(|pending| pending.with_header("x-retry-of", "3"))
    .expect("the event serializes");
    order.events.record_message(v2);
    let context = full_context();
    seal(
        &order,
        &context,
        &SubjectPrefix::new("shop").expect("a valid prefix"),
    )
}

/// A nested payload and an enum, on an aggregate loaded at version 41.
fn catalog_and_unpaid() -> Vec<OutboxMessage> {
    let mut order = Order {
        id: "10".into(),
        events: EventBuffer::at_version(41),
    };
    let leaf = |label: &str| Node {
        label: label.into(),
        children: vec![],
        next: None,
    };
    record(
        &mut order,
        CatalogTree {
            root: Node {
                label: "tea".into(),
                children: vec![leaf("green"), leaf("black")],
                next: Some(Box::new(leaf("coffee"))),
            },
        },
    );
    record(
        &mut order,
        OrderCancelled::Unpaid {
            order_id: 10,
            days: 14,
        },
    );
    seal(
        &order,
        &MessageContext::new().with_correlation_id("batch-2026-11-23"),
        &SubjectPrefix::default(),
    )
}

/// A standalone event on a fixed subject, written while handling `cause`.
fn caused_audit(cause: &OutboxMessage) -> OutboxMessage {
    let pending = PendingMessage::new(&Audit {
        actor: "billing".into(),
        action: "refund".into(),
    })
    .expect("the event serializes");
    OutboxMessage::standalone(
        pending,
        &MessageContext::caused_by(cause),
        &SubjectPrefix::default(),
    )
}

/// Under a partitioned prefix.
fn partitioned() -> Vec<OutboxMessage> {
    let mut order = order("11");
    record(&mut order, OrderCancelled::Staff { order_id: 11 });
    let prefix =
        SubjectPrefix::default().with_partitions(Partitions::new(8).expect("8 partitions"));
    seal(
        &order,
        &MessageContext::new().with_tenant("globex"),
        &prefix,
    )
}

fn full_context() -> MessageContext {
    MessageContext::new()
        .with_correlation_id("req-42")
        .with_causation_id("cmd-place-order-8")
        .with_tenant("acme")
        .with_traceparent(
            TRACEPARENT
                .parse::<TraceParent>()
                .expect("the spec's example"),
        )
        .with_tracestate(TRACESTATE)
        .and_then(|context| context.with_header("x-region", "eu"))
        .expect("valid trace state and header")
}

fn order(id: &str) -> Order {
    Order {
        id: id.into(),
        events: EventBuffer::new(),
    }
}

fn record<E: txoutbox_core::IntegrationEvent>(order: &mut Order, event: E) {
    order.events.record(event).expect("the event serializes");
}

fn seal(order: &Order, context: &MessageContext, prefix: &SubjectPrefix) -> Vec<OutboxMessage> {
    AggregateChanges::of(order, context, prefix).messages
}

/// Gives message `n` a fixed id and time (a root message's correlation id,
/// its own id, follows).
fn fix(message: &mut OutboxMessage, n: usize) {
    let id: MessageId = format!("0190f5a2-7b3c-7d4e-8f00-1122334455{n:02x}")
        .parse()
        .expect("a valid UUID");
    if message.correlation_id == message.id.to_string() {
        message.correlation_id = id.to_string();
    }
    if message.aggregate_id == message.id.to_string() {
        message.aggregate_id = id.to_string();
    }
    message.id = id;
    let base: DateTime<Utc> = "2026-11-23T10:00:00.123456Z"
        .parse()
        .expect("an RFC 3339 time");
    message.occurred_at = base + Duration::seconds(i64::try_from(n).unwrap_or(0));
}
