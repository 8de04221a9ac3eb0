//! Recording events on aggregates, sealing them into outbox messages, and the
//! wire contract that carries those messages over NATS.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use txoutbox_core::{
    AggregateChanges, AggregateRoot, EventBuffer, EventRegistry, IntegrationEvent, MessageContext,
    OutboxMessage, PendingMessage, RecordError, SubjectPrefix, TraceParent, wire,
};

#[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "order.placed")]
struct OrderPlaced {
    order_id: u64,
    total_cents: u64,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "order.shipped", version = 2, subject = "logistics.shipments")]
struct OrderShipped {
    order_id: u64,
}

/// Serializing a map with non-string keys to JSON fails at run time.
#[derive(Debug, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "order.unserializable")]
struct Unserializable {
    by_pair: HashMap<(u8, u8), u8>,
}

#[derive(Debug, AggregateRoot)]
#[aggregate(type = "order")]
struct Order {
    #[aggregate(id)]
    id: u64,
    events: EventBuffer,
}

fn new_order(id: u64) -> Order {
    Order {
        id,
        events: EventBuffer::new(),
    }
}

#[test]
fn sequences_follow_the_version_across_saves() {
    let prefix = SubjectPrefix::default();
    let mut order = new_order(7);
    order
        .record(OrderPlaced {
            order_id: 7,
            total_cents: 100,
        })
        .unwrap();
    order.record(OrderShipped { order_id: 7 }).unwrap();

    let first = AggregateChanges::of(&order, &MessageContext::new(), &prefix);
    assert_eq!((first.expected_version, first.new_version), (0, 2));
    assert_eq!(
        first
            .messages
            .iter()
            .map(|m| m.sequence)
            .collect::<Vec<_>>(),
        [1, 2]
    );
    order.events_mut().mark_saved(first.new_version);
    assert!(order.events().pending().is_empty());

    order.record(OrderShipped { order_id: 7 }).unwrap();
    let second = AggregateChanges::of(&order, &MessageContext::new(), &prefix);
    assert_eq!((second.expected_version, second.new_version), (2, 3));
    assert_eq!(second.messages[0].sequence, 3);
    assert!(
        second.messages[0].id > first.messages[1].id,
        "ids are time-ordered"
    );
}

#[test]
fn a_save_without_events_still_moves_the_version() {
    let order = Order {
        id: 1,
        events: EventBuffer::at_version(5),
    };
    let changes = AggregateChanges::of(&order, &MessageContext::new(), &SubjectPrefix::default());
    assert_eq!((changes.expected_version, changes.new_version), (5, 6));
    assert!(changes.messages.is_empty());
}

#[test]
fn sealing_leaves_the_aggregate_untouched_until_mark_saved() {
    let mut order = new_order(3);
    order
        .record(OrderPlaced {
            order_id: 3,
            total_cents: 1,
        })
        .unwrap();
    let _changes = AggregateChanges::of(&order, &MessageContext::new(), &SubjectPrefix::default());
    // The commit failed: nothing was lost, a retry seals the same messages.
    assert_eq!(order.version(), 0);
    assert_eq!(order.events().pending().len(), 1);
    let retry = AggregateChanges::of(&order, &MessageContext::new(), &SubjectPrefix::default());
    assert_eq!(retry.messages[0].id, order.events().pending()[0].id());
    assert_eq!(order.take_events().len(), 1);
}

#[test]
fn the_envelope_carries_everything() {
    let traceparent: TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        .parse()
        .unwrap();
    let context = MessageContext::new()
        .with_correlation_id("req-1")
        .with_causation_id("cmd-9")
        .with_tenant("acme")
        .with_traceparent(traceparent.clone())
        .with_header("x-region", "eu")
        .unwrap();
    let mut order = new_order(42);
    let pending = PendingMessage::new(&OrderPlaced {
        order_id: 42,
        total_cents: 990,
    })
    .unwrap()
    .with_header("x-region", "us")
    .unwrap()
    .with_header("x-priority", "high")
    .unwrap();
    let recorded_id = pending.id();
    order.events_mut().record_message(pending);
    order.record(OrderShipped { order_id: 42 }).unwrap();

    let prefix = SubjectPrefix::new("shop").unwrap();
    let changes = AggregateChanges::of(&order, &context, &prefix);
    let [placed, shipped] = changes.messages.as_slice() else {
        panic!("two messages")
    };

    assert_eq!(placed.id, recorded_id);
    assert_eq!(placed.id.as_uuid().get_version_num(), 7);
    assert_eq!(
        (placed.event_name.as_str(), placed.event_version),
        ("order.placed", 1)
    );
    assert_eq!(placed.subject, "shop.order.placed");
    assert_eq!(
        shipped.subject, "logistics.shipments",
        "a fixed subject ignores the prefix"
    );
    assert_eq!(shipped.event_version, 2);
    assert_eq!(
        (placed.aggregate_type.as_str(), placed.aggregate_id.as_str()),
        ("order", "42")
    );
    assert_eq!(placed.correlation_id, "req-1");
    assert_eq!(placed.causation_id.as_deref(), Some("cmd-9"));
    assert_eq!(placed.tenant.as_deref(), Some("acme"));
    assert_eq!(placed.traceparent.as_ref(), Some(&traceparent));
    assert_eq!(
        placed.headers.get("x-region"),
        Some("us"),
        "the message's own header wins"
    );
    assert_eq!(placed.headers.get("x-priority"), Some("high"));
    assert_eq!(shipped.headers.get("x-region"), Some("eu"));
    assert_eq!(
        placed.payload.as_str(),
        r#"{"order_id":42,"total_cents":990}"#
    );
    assert!(placed.occurred_at <= shipped.occurred_at);
}

#[test]
fn a_root_message_correlates_with_itself_and_children_inherit() {
    let mut order = new_order(1);
    order
        .record(OrderPlaced {
            order_id: 1,
            total_cents: 1,
        })
        .unwrap();
    let root = AggregateChanges::of(&order, &MessageContext::new(), &SubjectPrefix::default())
        .messages
        .remove(0);
    assert_eq!(root.correlation_id, root.id.to_string());
    assert_eq!(root.causation_id, None);

    let child_context = MessageContext::caused_by(&root);
    assert_eq!(
        child_context.correlation_id(),
        Some(root.correlation_id.as_str())
    );
    assert_eq!(
        child_context.causation_id(),
        Some(root.id.to_string().as_str())
    );
}

#[test]
fn a_serialization_error_surfaces_at_record() {
    let mut order = new_order(1);
    let mut by_pair = HashMap::new();
    by_pair.insert((1, 2), 3);
    let err = order.record(Unserializable { by_pair }).unwrap_err();
    let RecordError::Serialize {
        event_name,
        event_version,
        rust_type,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((*event_name, *event_version), ("order.unserializable", 1));
    assert!(rust_type.ends_with("Unserializable"));
    let chain = txoutbox_core::ErrorChain(&err).to_string();
    assert!(chain.contains("key must be a string"), "{chain}");
    assert!(order.events().pending().is_empty(), "nothing half-recorded");
}

fn sample_message() -> OutboxMessage {
    let context = MessageContext::new()
        .with_causation_id("cmd-1")
        .with_tenant("acme")
        .with_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        )
        .with_header("x-region", "eu")
        .unwrap();
    let mut order = new_order(9);
    order
        .record(OrderPlaced {
            order_id: 9,
            total_cents: 5,
        })
        .unwrap();
    AggregateChanges::of(&order, &context, &SubjectPrefix::default())
        .messages
        .remove(0)
}

fn as_pairs(headers: &[wire::WireHeader]) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(k, v)| (k.as_ref(), v.as_str()))
        .collect()
}

#[test]
fn wire_headers_round_trip_to_the_same_envelope() {
    let message = sample_message();
    let headers = wire::encode(&message, "/orders").unwrap();
    let pairs = as_pairs(&headers);
    let get = |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    assert_eq!(
        get(wire::NATS_MSG_ID),
        Some(message.id.to_string().as_str())
    );
    assert_eq!(get(wire::ID), get(wire::NATS_MSG_ID));
    assert_eq!(get(wire::SPEC_VERSION), Some("1.0"));
    assert_eq!(get(wire::SOURCE), Some("/orders"));
    assert_eq!(get(wire::SUBJECT), Some("9"));
    assert_eq!(get(wire::CONTENT_TYPE), Some("application/json"));
    assert_eq!(get(wire::SEQUENCE), Some("1"));
    assert_eq!(get("x-region"), Some("eu"));

    let decoded = wire::decode(
        &message.subject,
        pairs.iter().copied(),
        message.payload.as_bytes(),
    )
    .unwrap();
    assert_eq!(decoded, message);
    // ... and the payload decodes into the Rust type.
    let registry = EventRegistry::builder()
        .register::<OrderPlaced>()
        .build()
        .unwrap();
    let event: OrderPlaced = registry.decode_message(&decoded).unwrap();
    assert_eq!(
        event,
        OrderPlaced {
            order_id: 9,
            total_cents: 5
        }
    );
}

#[test]
fn wire_decoding_ignores_case_and_broker_headers() {
    let message = sample_message();
    let mut pairs: Vec<(String, String)> = wire::encode(&message, "/orders")
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k.to_ascii_uppercase(), v))
        .collect();
    pairs.retain(|(k, _)| k != "X-REGION");
    pairs.push(("x-region".into(), "eu".into()));
    pairs.push(("Nats-Expected-Stream".into(), "ORDERS".into()));
    let decoded = wire::decode(
        &message.subject,
        pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        message.payload.as_bytes(),
    )
    .unwrap();
    assert_eq!(decoded, message);
}

#[test]
fn wire_decoding_reports_what_is_wrong() {
    let message = sample_message();
    let headers = wire::encode(&message, "/orders").unwrap();
    let decode_with = |drop: &str, replace: Option<(&str, &str)>, payload: &[u8]| {
        let mut pairs = as_pairs(&headers);
        pairs.retain(|(k, _)| *k != drop);
        if let Some(pair) = replace {
            pairs.push(pair);
        }
        let err = wire::decode(&message.subject, pairs, payload)
            .map(|_| ())
            .unwrap_err();
        // The message and its cause, as a log line shows them.
        txoutbox_core::ErrorChain(&err).to_string()
    };
    let body = message.payload.as_bytes();
    assert_eq!(
        decode_with(wire::TYPE, None, body),
        "header `ce-type` is missing"
    );
    assert_eq!(
        decode_with(wire::SEQUENCE, None, body),
        "header `ce-sequence` is missing"
    );
    assert!(
        decode_with(wire::SEQUENCE, Some((wire::SEQUENCE, "-1")), body)
            .contains("`ce-sequence` has invalid value `-1`")
    );
    assert!(
        decode_with(wire::EVENT_VERSION, Some((wire::EVENT_VERSION, "0")), body)
            .contains("`ce-eventversion` has invalid value `0`")
    );
    assert!(
        decode_with(wire::ID, Some((wire::ID, "nope")), body)
            .contains("`ce-id` has invalid value `nope`")
    );
    assert!(decode_with(wire::TIME, Some((wire::TIME, "yesterday")), body).contains("`ce-time`"));
    assert!(
        decode_with(wire::SPEC_VERSION, Some((wire::SPEC_VERSION, "0.3")), body)
            .contains("only 1.0")
    );
    assert!(
        decode_with(wire::TRACEPARENT, Some((wire::TRACEPARENT, "00-x")), body)
            .contains("`traceparent`")
    );
    assert!(decode_with("", None, b"{not json").starts_with("payload is not valid JSON"));
    assert!(decode_with("", None, &[0xff, 0xfe]).contains("not UTF-8"));
}
