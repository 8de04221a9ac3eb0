//! An outbox message, whatever its fields hold (read from its JSON form,
//! the envelope's serde representation), through everything that writes it
//! out: serde, and `wire::encode` into the `HeaderMap` the publisher sends,
//! rendered as the client puts it on the wire and read back as a
//! subscriber's client reads it.
//!
//! Properties: serde round-trips it; every header NATS must carry is one it
//! can (async-nats panics on a value with CR or LF); what a subscriber
//! decodes is the message that was sent, field for field.

#![no_main]

use std::str::FromStr;

use libfuzzer_sys::fuzz_target;
use txoutbox_core::{OutboxMessage, wire};
use txoutbox_fuzz::nats_text;
use txoutbox_nats::async_nats::{HeaderMap, HeaderName, HeaderValue};

fuzz_target!(|bytes: &[u8]| {
    let Ok(message) = serde_json::from_slice::<OutboxMessage>(bytes) else {
        return;
    };
    let json = serde_json::to_string(&message).expect("a message serializes");
    let back: OutboxMessage = serde_json::from_str(&json).expect("a serialized message reads back");
    assert_eq!(back, message);

    let mut headers = HeaderMap::new();
    for (name, value) in wire::encode(&message, "/fuzz") {
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
