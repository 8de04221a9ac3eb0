//! Inputs the fuzz targets (`fuzz/` in the repository) found, kept as they
//! were found (`tests/fuzz_inputs/<target>-<what>`), each with what it must
//! now do.

use txoutbox_core::OutboxMessage;
use txoutbox_core::wire::{self, WireError};

/// An input of the target `envelope_decode`: the subject, `\r\n`, a NATS
/// header block (`NATS/1.0`, `name: value` lines, an empty line), then the
/// payload.
struct NatsText {
    subject: String,
    headers: Vec<(String, String)>,
    payload: Vec<u8>,
}

fn nats_text(bytes: &[u8]) -> NatsText {
    let at = |needle: &[u8], from: usize| {
        bytes[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|i| i + from)
            .expect("a well-formed input")
    };
    let subject_end = at(b"\r\n", 0);
    let block_end = at(b"\r\n\r\n", subject_end);
    let block = String::from_utf8_lossy(&bytes[subject_end + 2..block_end]).into_owned();
    let headers = block
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_owned(), value.trim().to_owned()))
        .collect();
    NatsText {
        subject: String::from_utf8_lossy(&bytes[..subject_end]).into_owned(),
        headers,
        payload: bytes[block_end + 4..].to_vec(),
    }
}

/// Decodes `message` with its header names in `order` (the values of one
/// name keep theirs, as in the client's `HeaderMap`).
fn decode_in_order(message: &NatsText, reverse: bool) -> Result<OutboxMessage, WireError> {
    let mut names: Vec<&str> = message.headers.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    if reverse {
        names.reverse();
    }
    let pairs = names.iter().flat_map(|name| {
        message
            .headers
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(n, v)| (n.as_str(), v.as_str()))
    });
    wire::decode(&message.subject, pairs, &message.payload)
}

/// `ce-eventversion: 0` and `ce-eventVersion: 1` (and `ce-type` twice,
/// differently spelled and valued): the subscriber's envelope depended on
/// the order its client happened to keep them in, so one process could
/// dead-letter a message another handled. Now refused in any order.
#[test]
fn a_header_given_twice_with_different_values_is_refused_in_any_order() {
    for input in [
        include_bytes!("fuzz_inputs/envelope_decode-eventversion-twice").as_slice(),
        include_bytes!("fuzz_inputs/envelope_decode-type-twice").as_slice(),
    ] {
        let message = nats_text(input);
        for reverse in [false, true] {
            let err = decode_in_order(&message, reverse).unwrap_err();
            assert!(matches!(err, WireError::Ambiguous(_)), "{err:?}");
        }
    }
}

/// The same value twice is no ambiguity.
#[test]
fn a_header_repeated_with_the_same_value_decodes() {
    let message = nats_text(include_bytes!("fuzz_inputs/envelope_decode-type-twice"));
    let mut pairs: Vec<(String, String)> = message
        .headers
        .iter()
        .filter(|(name, _)| {
            !matches!(
                name.to_ascii_lowercase().as_str(),
                "ce-type" | "ce-id" | "ce-time"
            )
        })
        .cloned()
        .collect();
    for (name, value) in [
        ("ce-type", "shop.order.placed"),
        ("CE-Type", "shop.order.placed"),
        ("ce-id", "0190f5a2-7b3c-7d4e-8f00-112233445502"),
        ("ce-time", "2026-11-23T10:00:03.123456Z"),
    ] {
        pairs.push((name.to_owned(), value.to_owned()));
    }
    let decoded = wire::decode(
        &message.subject,
        pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        &message.payload,
    );
    assert_eq!(decoded.unwrap().event_name, "shop.order.placed");
}

/// A tenant `"acme "` (from `message_roundtrip`): published as it was, it
/// arrived as `"acme"` (a NATS client trims header values), so consumers
/// saw another tenant, and an aggregate id `"7 "` would have merged into
/// aggregate `"7"`'s order. Such a message is now refused before it is
/// sent (and when it is written), and never decoded.
#[test]
fn a_value_that_would_arrive_trimmed_is_refused() {
    let input = include_bytes!("fuzz_inputs/message_roundtrip-tenant-trailing-space");
    let message: OutboxMessage = serde_json::from_slice(input).unwrap();
    assert_eq!(message.tenant.as_deref(), Some("acme "));
    for refused in [
        wire::check(&message).unwrap_err(),
        wire::encode(&message, "/shop").unwrap_err(),
    ] {
        assert!(
            matches!(
                refused,
                WireError::NotCarried {
                    header: wire::TENANT,
                    ..
                }
            ),
            "{refused:?}"
        );
    }
    let mut fine = message.clone();
    fine.tenant = Some("acme".to_owned());
    let headers = wire::encode(&fine, "/shop").unwrap();
    let padded = headers.iter().map(|(name, value)| {
        let value = if name == wire::TENANT {
            "acme "
        } else {
            value.as_str()
        };
        (name.as_ref(), value)
    });
    let err = wire::decode(&fine.subject, padded, fine.payload.as_bytes()).unwrap_err();
    assert!(matches!(err, WireError::NotCarried { .. }), "{err:?}");
}

/// An application header `"x-regimn": "eu   "` (from `message_roundtrip`):
/// `Headers` now refuses a value with whitespace at either end, so such a
/// message cannot even be read.
#[test]
fn an_application_header_that_would_arrive_trimmed_is_refused() {
    let input = include_bytes!("fuzz_inputs/message_roundtrip-header-trailing-spaces");
    let err = serde_json::from_slice::<OutboxMessage>(input).unwrap_err();
    assert!(err.to_string().contains("x-regimn"), "{err}");
}

/// A `tracestate` `"cE,06e "` (from `trace_context`): the context took it
/// and consumers received `"cE,06e"`. Refused now.
#[test]
fn a_tracestate_that_would_arrive_trimmed_is_refused() {
    let input = include_bytes!("fuzz_inputs/trace_context-tracestate-trailing-space");
    let text = std::str::from_utf8(input).unwrap();
    let (_, tracestate) = text.split_once('\n').unwrap();
    assert_eq!(tracestate, "cE,06e ");
    assert!(
        txoutbox_core::MessageContext::new()
            .with_tracestate(tracestate)
            .is_err()
    );
    assert!(
        txoutbox_core::MessageContext::new()
            .with_tracestate("cE, 06e")
            .is_ok()
    );
}

/// A lock file with a byte that is not UTF-8 (from `schema_lock`): it was
/// reported as a failure to read the file (`LockError::Io`), as if the disk
/// had failed; it is a malformed lock.
#[cfg(feature = "schema")]
#[test]
fn a_lock_file_that_is_not_utf8_is_malformed() {
    use txoutbox_core::EventRegistry;
    use txoutbox_core::schema::{LockError, SchemaLock};

    let path = std::env::temp_dir().join(format!("fuzz-lock-{}.json", std::process::id()));
    std::fs::write(&path, include_bytes!("fuzz_inputs/schema_lock-not-utf8")).unwrap();
    let registry = EventRegistry::builder().build().unwrap();
    let result = SchemaLock::new(&path).check(&registry);
    std::fs::remove_file(&path).unwrap();
    assert!(
        matches!(result, Err(LockError::Malformed { .. })),
        "{result:?}"
    );
}

/// A message of the year -2026 (from `message_roundtrip`; a row's time can
/// be anything PostgreSQL keeps): `ce-time` was written as
/// `-2026-11-23T10:00:04.123456Z`, which no RFC 3339 reader takes, so every
/// consumer dead-lettered it as an invalid envelope. Refused before it is
/// sent, and when it is written.
#[test]
fn a_time_rfc3339_cannot_write_is_refused() {
    let input = include_bytes!("fuzz_inputs/message_roundtrip-year-before-0000");
    let message: OutboxMessage = serde_json::from_slice(input).unwrap();
    let err = wire::encode(&message, "/shop").unwrap_err();
    assert!(
        matches!(
            err,
            WireError::NotCarried {
                header: wire::TIME,
                ..
            }
        ),
        "{err:?}"
    );
    let mut fine = message;
    fine.occurred_at = "0000-01-01T00:00:00Z".parse().unwrap();
    let headers = wire::encode(&fine, "/shop").unwrap();
    let decoded = wire::decode(
        &fine.subject,
        headers.iter().map(|(k, v)| (k.as_ref(), v.as_str())),
        fine.payload.as_bytes(),
    );
    assert_eq!(decoded.unwrap().occurred_at, fine.occurred_at);
}
