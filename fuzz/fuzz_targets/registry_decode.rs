//! The registry's decode and upcast chains: `(name, version, payload)`,
//! written as `name\nversion\npayload`, into every registered type.
//!
//! Properties: the untyped decode names the registration it used and tells
//! an unknown name from an unknown version from a malformed payload; a
//! typed decode succeeds exactly when the untyped one does and the type
//! accepts the (name, version); an upcast value is the chain of `From`s
//! applied to the old version's value; a decoded value serializes and
//! decodes back to itself.

#![no_main]

use std::fmt::Debug;

use libfuzzer_sys::fuzz_target;
use txoutbox_core::{DecodeError, EventRegistry, IntegrationEvent};
use txoutbox_fuzz::events::{
    self, Audit, CatalogTree, OrderCancelled, OrderPlacedV1, OrderPlacedV2, OrderPlacedV3,
};

fuzz_target!(|bytes: &[u8]| {
    let Some((name, version, payload)) = split(bytes) else {
        return;
    };
    let registry = events::registry();
    untyped(registry, name, version, payload);
    typed::<OrderPlacedV1>(registry, name, version, payload);
    typed::<OrderPlacedV2>(registry, name, version, payload);
    typed::<OrderPlacedV3>(registry, name, version, payload);
    typed::<OrderCancelled>(registry, name, version, payload);
    typed::<CatalogTree>(registry, name, version, payload);
    typed::<Audit>(registry, name, version, payload);
    upcasts(registry, name, version, payload);
});

fn split(bytes: &[u8]) -> Option<(&str, u32, &[u8])> {
    let name_end = bytes.iter().position(|b| *b == b'\n')?;
    let name = std::str::from_utf8(&bytes[..name_end]).ok()?;
    let rest = &bytes[name_end + 1..];
    let version_end = rest.iter().position(|b| *b == b'\n')?;
    let version = std::str::from_utf8(&rest[..version_end])
        .ok()?
        .parse()
        .ok()?;
    Some((name, version, &rest[version_end + 1..]))
}

fn untyped(registry: &EventRegistry, name: &str, version: u32, payload: &[u8]) {
    let known = registry.versions(name);
    match registry.decode(name, version, payload) {
        Ok(decoded) => {
            assert_eq!(decoded.registration().name(), name);
            assert_eq!(decoded.registration().version(), version);
        }
        Err(DecodeError::UnknownEvent {
            name: n,
            version: v,
        }) => {
            assert_eq!((n.as_str(), v), (name, version));
            assert!(known.is_empty());
        }
        Err(DecodeError::UnknownVersion { known: k, .. }) => {
            assert_eq!(k, known);
            assert!(!k.is_empty() && !k.contains(&version));
        }
        Err(DecodeError::Malformed {
            name: n,
            version: v,
            ..
        }) => {
            assert_eq!((n.as_str(), v), (name, version));
            assert!(registry.get(name, version).is_some());
        }
        Err(other) => panic!("the untyped decode converts nothing: {other:?}"),
    }
}

fn typed<E>(registry: &EventRegistry, name: &str, version: u32, payload: &[u8])
where
    E: IntegrationEvent + PartialEq + Debug,
{
    let untyped_ok = registry.decode(name, version, payload).is_ok();
    let accepts = registry.accepts::<E>(name, version);
    let typed = registry.decode_as::<E>(name, version, payload);
    assert_eq!(typed.is_ok(), untyped_ok && accepts, "{typed:?}");
    if let Ok(value) = typed {
        let bytes = serde_json::to_vec(&value).expect("a decoded event serializes");
        let again = registry
            .decode_as::<E>(E::NAME, E::VERSION, &bytes)
            .expect("a serialized event decodes");
        assert_eq!(again, value);
    }
}

/// `shop.order.placed` read as v3 is v1 or v2 read as itself and upcast
/// by hand.
fn upcasts(registry: &EventRegistry, name: &str, version: u32, payload: &[u8]) {
    if name != OrderPlacedV3::NAME {
        return;
    }
    let Ok(v3) = registry.decode_as::<OrderPlacedV3>(name, version, payload) else {
        return;
    };
    let by_hand = match version {
        1 => OrderPlacedV3::from(OrderPlacedV2::from(
            serde_json::from_slice::<OrderPlacedV1>(payload).expect("v1 decodes as v1"),
        )),
        2 => OrderPlacedV3::from(
            serde_json::from_slice::<OrderPlacedV2>(payload).expect("v2 decodes as v2"),
        ),
        _ => serde_json::from_slice::<OrderPlacedV3>(payload).expect("v3 decodes as v3"),
    };
    assert_eq!(v3, by_hand);
}
