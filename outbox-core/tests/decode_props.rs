//! Malformed input never panics: random bytes and headers fed to every
//! decoding entry point come back as values or typed errors.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use txoutbox_core::naming::{validate_event_name, validate_subject};
use txoutbox_core::{DecodeError, EventRegistry, IntegrationEvent, Payload, TraceParent, wire};

#[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "prop.flat")]
struct Flat {
    id: u64,
    name: String,
    tags: Vec<String>,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "prop.nested", version = 2, upcast_from = NestedV1)]
struct Nested {
    inner: Option<BTreeMap<String, Vec<i32>>>,
    kind: Kind,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "prop.nested", version = 1)]
struct NestedV1 {
    kind: Kind,
}

impl From<NestedV1> for Nested {
    fn from(v1: NestedV1) -> Self {
        Self {
            inner: None,
            kind: v1.kind,
        }
    }
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t")]
enum Kind {
    A,
    B { x: f64 },
}

fn registry() -> EventRegistry {
    EventRegistry::builder()
        .register::<Flat>()
        .register::<Nested>()
        .build()
        .unwrap()
}

/// Bytes that are sometimes nearly valid JSON for the types above.
fn payloads() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        "\\PC{0,64}".prop_map(String::into_bytes),
        r#"\{"(id|name|tags|kind|inner|t)":("[a-zA-Z]{0,3}"|-?[0-9]{1,25}|\[\]|\{"t":"[AB]"\}|null|true)\}"#
            .prop_map(String::into_bytes),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn registry_decode_never_panics(
        name in prop_oneof![Just("prop.flat".to_owned()), Just("prop.nested".to_owned()), "\\PC{0,12}"],
        version in 0u32..4,
        payload in payloads(),
    ) {
        let registry = registry();
        match registry.decode(&name, version, &payload) {
            Ok(decoded) => prop_assert_eq!(decoded.registration().name(), name.as_str()),
            Err(DecodeError::Malformed { name: n, version: v, .. }) => {
                prop_assert_eq!((n, v), (name.clone(), version));
            }
            Err(_) => {}
        }
        let _ = registry.decode_as::<Nested>(&name, version, &payload);
        let _ = registry.decode_as::<Flat>(&name, version, &payload);
    }

    #[test]
    fn wire_decode_never_panics(
        headers in proptest::collection::vec(
            (prop_oneof![
                Just(wire::ID.to_owned()), Just(wire::TYPE.to_owned()), Just(wire::TIME.to_owned()),
                Just(wire::SEQUENCE.to_owned()), Just(wire::EVENT_VERSION.to_owned()),
                Just(wire::SPEC_VERSION.to_owned()), Just(wire::TRACEPARENT.to_owned()),
                "\\PC{0,10}",
            ], "\\PC{0,40}"),
            0..16,
        ),
        payload in payloads(),
    ) {
        let _ = wire::decode("s", headers.iter().map(|(k, v)| (k.as_str(), v.as_str())), &payload);
    }

    #[test]
    fn text_parsers_never_panic(text in "\\PC{0,80}") {
        let _ = text.parse::<TraceParent>();
        let _ = Payload::from_json(text.clone());
        let _ = validate_event_name(&text);
        let _ = validate_subject(&text);
    }

    #[test]
    fn valid_payloads_round_trip(id in any::<u64>(), name in "\\PC{0,20}", tags in proptest::collection::vec("\\PC{0,5}", 0..4)) {
        let flat = Flat { id, name, tags };
        let bytes = serde_json::to_vec(&flat).unwrap();
        prop_assert_eq!(registry().decode_as::<Flat>("prop.flat", 1, &bytes).unwrap(), flat);
    }
}
