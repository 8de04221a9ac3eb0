//! An incoming JetStream message, as the subscriber reads it: the NATS
//! header block and payload (`txoutbox_fuzz::nats_text`) into the client's
//! `HeaderMap`, its pairs into `wire::decode`, the envelope into a
//! `Delivery` and the registry's typed decode; and as `outbox verify` reads
//! it (`stream_read::stored`).
//!
//! Properties: the envelope does not depend on the order of the header
//! names (a `HeaderMap` iterates in no fixed order); each field is the
//! value of its header; a decoded envelope re-encodes (`wire::encode`) to
//! headers NATS carries, which decode to the same envelope; the typed
//! decode agrees with the untyped one; a message caused by it can be
//! published.

#![no_main]

use libfuzzer_sys::fuzz_target;
use txoutbox_core::{Delivery, EventRegistry, IntegrationEvent, OutboxMessage, wire};
use txoutbox_fuzz::events::{
    self, Audit, CatalogTree, OrderCancelled, OrderPlacedV1, OrderPlacedV2, OrderPlacedV3,
};
use txoutbox_fuzz::nats_text::{self, NatsMessage};
use txoutbox_fuzz::rules;
use txoutbox_nats::stream_read;

fuzz_target!(|bytes: &[u8]| {
    let Some(message) = nats_text::parse(bytes) else {
        return;
    };
    let pairs = nats_text::pairs(&message.headers);
    let decoded = wire::decode(&message.subject, pairs.iter().copied(), &message.payload);
    same_in_any_order(&message, &pairs, &decoded);
    verify_reads(&message);
    let Ok(envelope) = decoded else {
        return;
    };
    fields_are_headers(&message, &pairs, &envelope);
    reencodes(&envelope);
    dispatches(&envelope);
});

/// The header names grouped (values of one name keep their order, as in a
/// `HeaderMap`), the groups sorted by name forwards and backwards: both
/// decode as the map's order did.
fn same_in_any_order(
    message: &NatsMessage,
    pairs: &[(&str, &str)],
    decoded: &Result<OutboxMessage, wire::WireError>,
) {
    let mut names: Vec<&str> = pairs.iter().map(|(name, _)| *name).collect();
    names.sort_unstable();
    names.dedup();
    let in_order = |names: &mut dyn Iterator<Item = &&str>| -> Vec<(&str, &str)> {
        names
            .flat_map(|name| pairs.iter().filter(move |(n, _)| n == name).copied())
            .collect()
    };
    for order in [
        in_order(&mut names.iter()),
        in_order(&mut names.iter().rev()),
    ] {
        let again = wire::decode(&message.subject, order.iter().copied(), &message.payload);
        match (decoded, &again) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "the envelope depends on the header order"),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("the header order decides whether it decodes: {a:?} / {b:?}"),
        }
    }
}

/// `outbox verify`'s reading of a stored message: its id and its place in
/// its aggregate, from the headers it names.
fn verify_reads(message: &NatsMessage) {
    let stored = stream_read::stored(5, Some(&message.headers));
    assert_eq!(stored.stream_sequence, 5);
    let get = |name: &str| message.headers.get(name).map(|v| v.as_str().to_owned());
    assert_eq!(stored.message_id, get(wire::NATS_MSG_ID));
    let sequence = get(wire::SEQUENCE).and_then(|s| s.parse::<u64>().ok());
    match &stored.position {
        Some(position) => {
            assert_eq!(
                Some(&position.aggregate_type),
                get(wire::AGGREGATE_TYPE).as_ref()
            );
            assert_eq!(Some(&position.aggregate_id), get(wire::SUBJECT).as_ref());
            assert_eq!(Some(position.sequence), sequence);
        }
        None => assert!(
            get(wire::AGGREGATE_TYPE).is_none()
                || get(wire::SUBJECT).is_none()
                || sequence.is_none()
        ),
    }
}

/// Each field of the envelope is what its header says (the first value of
/// the name in any case), its headers the application's.
fn fields_are_headers(message: &NatsMessage, pairs: &[(&str, &str)], envelope: &OutboxMessage) {
    let first = |name: &str| {
        pairs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    };
    assert_eq!(envelope.subject, message.subject);
    assert_eq!(Some(envelope.event_name.as_str()), first(wire::TYPE));
    assert_eq!(
        Some(envelope.aggregate_type.as_str()),
        first(wire::AGGREGATE_TYPE)
    );
    assert_eq!(Some(envelope.aggregate_id.as_str()), first(wire::SUBJECT));
    assert_eq!(
        Some(envelope.correlation_id.as_str()),
        first(wire::CORRELATION_ID)
    );
    assert_eq!(envelope.causation_id.as_deref(), first(wire::CAUSATION_ID));
    assert_eq!(envelope.tenant.as_deref(), first(wire::TENANT));
    assert_eq!(envelope.tracestate.as_deref(), first(wire::TRACESTATE));
    assert_eq!(
        envelope.traceparent.as_ref().map(|t| t.as_str()),
        first(wire::TRACEPARENT)
    );
    assert_eq!(
        Some(envelope.id),
        first(wire::ID).and_then(|id| id.parse().ok())
    );
    assert_eq!(
        Some(envelope.sequence),
        first(wire::SEQUENCE).and_then(|s| s.parse().ok())
    );
    assert!(envelope.event_version >= 1);
    assert_eq!(envelope.deliver_at, None);
    let trimmed = std::str::from_utf8(&message.payload)
        .expect("a decoded payload is UTF-8")
        .trim_matches([' ', '\t', '\n', '\r']);
    assert_eq!(envelope.payload.as_str(), trimmed);
    let application: Vec<&(&str, &str)> = pairs
        .iter()
        .filter(|(n, _)| !rules::is_reserved_header(n))
        .collect();
    for (name, _) in &application {
        let last = application
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v);
        assert_eq!(
            envelope.headers.get(name),
            last,
            "application header {name}"
        );
    }
    assert!(
        envelope
            .headers
            .iter()
            .all(|(n, v)| rules::is_application_header(n, v))
    );
}

/// A decoded envelope is one the publisher can send again, unchanged.
fn reencodes(envelope: &OutboxMessage) {
    let headers = wire::encode(envelope, "/fuzz").expect("a decoded envelope re-encodes");
    for (name, value) in &headers {
        assert!(rules::nats_can_carry(name, value), "{name}: {value:?}");
    }
    let again = wire::decode(
        &envelope.subject,
        headers.iter().map(|(k, v)| (k.as_ref(), v.as_str())),
        envelope.payload.as_bytes(),
    )
    .expect("a decoded envelope re-encodes to a valid one");
    assert_eq!(&again, envelope);
}

/// What the subscriber does next: the registry's decode, into the newest
/// type of the event's name (through upcasts), and the delivery handed to
/// the handler, whose caused messages go out again.
fn dispatches(envelope: &OutboxMessage) {
    let registry = events::registry();
    let untyped = registry.decode(
        &envelope.event_name,
        envelope.event_version,
        envelope.payload.as_bytes(),
    );
    match envelope.event_name.as_str() {
        OrderPlacedV3::NAME => {
            typed_agrees::<OrderPlacedV3>(registry, envelope, untyped.is_ok());
            typed_agrees::<OrderPlacedV2>(registry, envelope, untyped.is_ok());
            typed_agrees::<OrderPlacedV1>(registry, envelope, untyped.is_ok());
        }
        OrderCancelled::NAME => typed_agrees::<OrderCancelled>(registry, envelope, untyped.is_ok()),
        CatalogTree::NAME => typed_agrees::<CatalogTree>(registry, envelope, untyped.is_ok()),
        Audit::NAME => typed_agrees::<Audit>(registry, envelope, untyped.is_ok()),
        _ => assert!(untyped.is_err()),
    }
    let delivery = Delivery::new(envelope.clone())
        .with_stream("EVENTS", 9)
        .with_delivery_count(2);
    assert_eq!(delivery.message(), envelope);
    assert!(delivery.is_redelivery());
    let caused = delivery.caused_context();
    assert_eq!(
        caused.correlation_id(),
        Some(envelope.correlation_id.as_str())
    );
    assert_eq!(
        caused.causation_id(),
        Some(envelope.id.to_string().as_str())
    );
    assert_eq!(caused.tenant(), envelope.tenant.as_deref());
    let pending = txoutbox_core::PendingMessage::new(&Audit {
        actor: "fuzz".into(),
        action: "caused".into(),
    })
    .expect("the event serializes");
    let next = OutboxMessage::standalone(pending, &caused, &Default::default());
    let encoded =
        wire::encode(&next, "/fuzz").expect("a message caused by a decoded one can be sent");
    for (name, value) in encoded {
        assert!(
            rules::nats_can_carry(&name, &value),
            "a caused message carries {name}: {value:?}"
        );
    }
}

/// `decode_message::<E>` succeeds exactly when the untyped decode does and
/// `E` accepts the message's (name, version).
fn typed_agrees<E: IntegrationEvent + PartialEq + std::fmt::Debug>(
    registry: &EventRegistry,
    envelope: &OutboxMessage,
    untyped_ok: bool,
) {
    let typed = registry.decode_message::<E>(envelope);
    let accepts = registry.accepts::<E>(&envelope.event_name, envelope.event_version);
    assert_eq!(typed.is_ok(), untyped_ok && accepts, "{typed:?}");
}
