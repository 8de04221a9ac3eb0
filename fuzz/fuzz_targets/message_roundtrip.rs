//! An outbox message, whatever its fields hold (read from its JSON form,
//! the envelope's serde representation), through everything that writes it
//! out: serde, and `wire::encode` into the `HeaderMap` the publisher sends,
//! rendered as the client puts it on the wire and read back as a
//! subscriber's client reads it.
//!
//! Properties: serde round-trips it; `wire::encode` refuses exactly the
//! messages with a value that would not arrive unchanged (a line break, on
//! which async-nats panics; whitespace at either end, which it trims; a
//! time outside RFC 3339's years); every
//! header it writes is one NATS carries; what a subscriber decodes is the
//! message that was sent, field for field.

#![no_main]

use std::str::FromStr;

use libfuzzer_sys::fuzz_target;
use txoutbox_core::{OutboxMessage, wire};
use txoutbox_fuzz::{nats_text, rules};
use txoutbox_nats::async_nats::{HeaderMap, HeaderName, HeaderValue};

fuzz_target!(|bytes: &[u8]| {
    let Ok(message) = serde_json::from_slice::<OutboxMessage>(bytes) else {
        return;
    };
    let json = serde_json::to_string(&message).expect("a message serializes");
    let back: OutboxMessage = serde_json::from_str(&json).expect("a serialized message reads back");
    assert_eq!(back, message);

    let mut headers = HeaderMap::new();
    let encoded = wire::encode(&message, "/fuzz");
    assert_eq!(encoded.is_ok(), sendable(&message), "{encoded:?}");
    assert_eq!(wire::check(&message).is_ok(), encoded.is_ok());
    let Ok(encoded) = encoded else {
        return;
    };
    for (name, value) in encoded {
        let name = HeaderName::from_str(&name).expect("a header name NATS carries");
        let value = HeaderValue::from_str(&value)
            .unwrap_or_else(|_| panic!("header {name} has a value NATS cannot carry: {value:?}"));
        headers.insert(name, value);
    }
    if message.subject.is_empty() || message.subject.contains(char::is_whitespace) {
        // Not a subject NATS publishes on: the publisher's classification
        // of the refusal deals with it, not the envelope.
        return;
    }
    let sent = nats_text::render(
        &message.subject,
        nats_text::pairs(&headers),
        message.payload.as_bytes(),
    );
    let received = nats_text::parse(&sent).expect("what the client sends, it reads");
    let pairs = nats_text::pairs(&received.headers);
    let decoded = wire::decode(&received.subject, pairs.iter().copied(), &received.payload);
    if message.event_version == 0 {
        assert!(decoded.is_err(), "version 0 decoded");
        return;
    }
    let mut expected = message.clone();
    expected.deliver_at = None;
    assert_eq!(decoded.expect("a sent message decodes"), expected);
});

/// Whether every value the message's headers carry arrives unchanged.
fn sendable(message: &OutboxMessage) -> bool {
    rules::is_rfc3339_time(message.occurred_at)
        && [
            Some(&message.event_name),
            Some(&message.aggregate_type),
            Some(&message.aggregate_id),
            Some(&message.correlation_id),
            message.causation_id.as_ref(),
            message.tenant.as_ref(),
            message.tracestate.as_ref(),
        ]
        .into_iter()
        .flatten()
        .all(|value| rules::arrives_unchanged(value))
        && message
            .headers
            .iter()
            .all(|(_, value)| rules::arrives_unchanged(value))
}
