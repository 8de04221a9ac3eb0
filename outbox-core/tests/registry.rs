//! The registry's start-up validation and decoding, with hand-written impls
//! (no inventory), so each test builds exactly the set of types it means to.

use serde::{Deserialize, Serialize};
use txoutbox_core::registry::{EventRegistration, RegistryError};
use txoutbox_core::{DecodeError, EventRegistry, IntegrationEvent};

macro_rules! event {
    ($ty:ident, $name:literal, $version:literal $(, upcast $old:ty)?) => {
        impl IntegrationEvent for $ty {
            const NAME: &'static str = $name;
            const VERSION: u32 = $version;
            $(const REGISTRATION: EventRegistration = EventRegistration::of_upcasting::<Self, $old>();)?
        }
    };
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct PlacedV1 {
    total: u64,
}
event!(PlacedV1, "order.placed", 1);

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct PlacedV2 {
    total_cents: u64,
}
event!(PlacedV2, "order.placed", 2, upcast PlacedV1);
impl From<PlacedV1> for PlacedV2 {
    fn from(v1: PlacedV1) -> Self {
        Self {
            total_cents: v1.total * 100,
        }
    }
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Placed {
    total_cents: u64,
    currency: String,
}
event!(Placed, "order.placed", 3, upcast PlacedV2);
impl From<PlacedV2> for Placed {
    fn from(v2: PlacedV2) -> Self {
        Self {
            total_cents: v2.total_cents,
            currency: "EUR".into(),
        }
    }
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Shipped {
    carrier: String,
}
event!(Shipped, "order.shipped", 1);

fn chain_registry() -> EventRegistry {
    EventRegistry::builder()
        .register::<Placed>()
        .register::<Shipped>()
        .build()
        .expect("valid registry")
}

#[test]
fn register_brings_the_whole_upcast_chain() {
    let registry = chain_registry();
    assert_eq!(registry.versions("order.placed"), [1, 2, 3]);
    assert!(registry.contains::<PlacedV1>() && registry.contains::<PlacedV2>());
    assert_eq!(registry.len(), 4);
    let listed: Vec<_> = registry.iter().map(|r| (r.name(), r.version())).collect();
    assert_eq!(
        listed,
        [
            ("order.placed", 1),
            ("order.placed", 2),
            ("order.placed", 3),
            ("order.shipped", 1)
        ]
    );
}

#[test]
fn registering_a_type_twice_is_harmless() {
    let registry = EventRegistry::builder()
        .register::<Shipped>()
        .register::<Shipped>()
        .build()
        .expect("same type twice is one registration");
    assert_eq!(registry.len(), 1);
}

#[test]
fn decodes_each_version_into_its_own_type() {
    let registry = chain_registry();
    let v1: PlacedV1 = registry
        .decode_as("order.placed", 1, br#"{"total":3}"#)
        .unwrap();
    assert_eq!(v1, PlacedV1 { total: 3 });
    let decoded = registry
        .decode("order.shipped", 1, br#"{"carrier":"dhl"}"#)
        .unwrap();
    assert_eq!(
        decoded.registration().rust_type(),
        std::any::type_name::<Shipped>()
    );
    assert_eq!(
        decoded.value().downcast_ref::<Shipped>(),
        Some(&Shipped {
            carrier: "dhl".into()
        })
    );
}

#[test]
fn upcasts_older_versions_through_the_whole_chain() {
    let registry = chain_registry();
    let from_v1: Placed = registry
        .decode_as("order.placed", 1, br#"{"total":3}"#)
        .unwrap();
    assert_eq!(
        from_v1,
        Placed {
            total_cents: 300,
            currency: "EUR".into()
        }
    );
    let from_v2: Placed = registry
        .decode_as("order.placed", 2, br#"{"total_cents":5}"#)
        .unwrap();
    assert_eq!(from_v2.total_cents, 5);
    let v2_from_v1: PlacedV2 = registry
        .decode_as("order.placed", 1, br#"{"total":1}"#)
        .unwrap();
    assert_eq!(v2_from_v1, PlacedV2 { total_cents: 100 });
    assert!(registry.accepts::<Placed>("order.placed", 1));
    assert!(
        !registry.accepts::<PlacedV1>("order.placed", 3),
        "no downcasts"
    );
    assert!(!registry.accepts::<Shipped>("order.placed", 1));
}

#[test]
fn newer_messages_do_not_downcast() {
    let err = chain_registry()
        .decode_as::<PlacedV1>("order.placed", 3, br#"{"total_cents":1,"currency":"EUR"}"#)
        .unwrap_err();
    assert!(
        matches!(&err, DecodeError::NotConvertible { version: 3, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("PlacedV1"), "{err}");
}

#[test]
fn unknown_name_and_unknown_version_are_told_apart() {
    let registry = chain_registry();
    let err = registry.decode("order.refunded", 1, b"{}").unwrap_err();
    assert!(
        matches!(&err, DecodeError::UnknownEvent { name, version: 1 } if name == "order.refunded")
    );
    assert_eq!(
        err.to_string(),
        "no event type is registered as `order.refunded` (message has v1)"
    );

    let err = registry.decode("order.placed", 9, b"{}").unwrap_err();
    assert!(
        matches!(&err, DecodeError::UnknownVersion { known, version: 9, .. } if known == &[1, 2, 3])
    );
    assert_eq!(
        err.to_string(),
        "`order.placed` v9 is not registered (known versions: [1, 2, 3])"
    );
}

#[test]
fn malformed_payloads_name_the_event_and_keep_serdes_message() {
    let registry = chain_registry();
    let err = registry
        .decode("order.shipped", 1, br#"{"carrier":42}"#)
        .unwrap_err();
    let DecodeError::Malformed {
        name,
        version,
        rust_type,
        source,
    } = &err
    else {
        panic!("expected Malformed, got {err:?}");
    };
    assert_eq!((name.as_str(), *version), ("order.shipped", 1));
    assert!(rust_type.ends_with("Shipped"));
    assert!(source.is_data());
    // serde's message is the source, said once: in the chain.
    let text = txoutbox_core::ErrorChain(&err).to_string();
    assert!(
        text.starts_with("cannot decode `order.shipped` v1 into "),
        "{text}"
    );
    assert!(
        text.contains("invalid type: integer `42`, expected a string"),
        "{text}"
    );

    let err = registry
        .decode("order.shipped", 1, b"{\"carrier\":")
        .unwrap_err();
    let text = txoutbox_core::ErrorChain(&err).to_string();
    assert!(text.contains("EOF while parsing"), "{text}");
    assert!(matches!(err, DecodeError::Malformed { ref source, .. } if source.is_eof()));
}

#[derive(Debug, Serialize, Deserialize)]
struct ShippedAgain {
    by: String,
}
event!(ShippedAgain, "order.shipped", 1);

#[test]
fn two_types_claiming_one_name_and_version_are_rejected_naming_both() {
    let err = EventRegistry::builder()
        .register::<Shipped>()
        .register::<ShippedAgain>()
        .build()
        .unwrap_err();
    let RegistryError::DuplicateEvent {
        name,
        version,
        first,
        second,
    } = &err
    else {
        panic!("expected DuplicateEvent, got {err:?}");
    };
    assert_eq!((*name, *version), ("order.shipped", 1));
    assert!(
        first.ends_with("::Shipped") && second.ends_with("::ShippedAgain"),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("registry::Shipped") && text.contains("registry::ShippedAgain"),
        "{text}"
    );
}

// v3 upcasting straight from v1 while v2 exists: a gap.
#[derive(Serialize, Deserialize)]
struct SkipV3;
event!(SkipV3, "order.placed", 3, upcast PlacedV1);
impl From<PlacedV1> for SkipV3 {
    fn from(_: PlacedV1) -> Self {
        SkipV3
    }
}

#[test]
fn an_upcast_that_skips_a_version_is_a_gap() {
    let err = EventRegistry::builder()
        .register::<SkipV3>()
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            RegistryError::UpcastGap {
                source_version: 1,
                expected: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("upcasts from v1; an upcast must come from v2"),
        "{err}"
    );
}

// v3 -> v2 exists, v2 has no upcast, but v1 is registered: unreachable.
#[derive(Serialize, Deserialize)]
struct LoneV2;
event!(LoneV2, "order.placed", 2);
#[derive(Serialize, Deserialize)]
struct TopV3;
event!(TopV3, "order.placed", 3, upcast LoneV2);
impl From<LoneV2> for TopV3 {
    fn from(_: LoneV2) -> Self {
        TopV3
    }
}

#[test]
fn a_registered_version_the_chain_cannot_reach_is_rejected() {
    let err = EventRegistry::builder()
        .register::<TopV3>()
        .register::<PlacedV1>()
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            RegistryError::UnreachableVersion {
                version: 1,
                newest: 3,
                chain_end: 2,
                ..
            }
        ),
        "{err:?}"
    );
    // Without v1 the same chain is fine.
    assert!(EventRegistry::builder().register::<TopV3>().build().is_ok());
}

// Two types upcasting from each other.
#[derive(Serialize, Deserialize)]
struct CycleA;
event!(CycleA, "loop", 1, upcast CycleB);
#[derive(Serialize, Deserialize)]
struct CycleB;
event!(CycleB, "loop", 2, upcast CycleA);
impl From<CycleB> for CycleA {
    fn from(_: CycleB) -> Self {
        CycleA
    }
}
impl From<CycleA> for CycleB {
    fn from(_: CycleA) -> Self {
        CycleB
    }
}

#[test]
fn an_upcast_cycle_is_rejected() {
    let err = EventRegistry::builder()
        .register::<CycleA>()
        .build()
        .unwrap_err();
    let RegistryError::UpcastCycle { chain } = &err else {
        panic!("expected UpcastCycle, got {err:?}");
    };
    assert_eq!(chain.len(), 3, "A -> B -> A: {chain:?}");
    assert!(err.to_string().starts_with("upcast cycle: "), "{err}");
}

// Upcast from an event with another name.
#[derive(Serialize, Deserialize)]
struct RenamedV2;
event!(RenamedV2, "order.renamed", 2, upcast PlacedV1);
impl From<PlacedV1> for RenamedV2 {
    fn from(_: PlacedV1) -> Self {
        RenamedV2
    }
}

#[test]
fn an_upcast_across_names_is_rejected() {
    let err = EventRegistry::builder()
        .register::<RenamedV2>()
        .build()
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::UpcastNameMismatch { .. }),
        "{err:?}"
    );
}

// Hand-written impls that break the naming rules are caught at start-up.
#[derive(Serialize, Deserialize)]
struct BadName;
event!(BadName, "order placed", 1);
#[derive(Serialize, Deserialize)]
struct ZeroVersion;
event!(ZeroVersion, "order.zero", 0);
#[derive(Serialize, Deserialize)]
struct BadSubject;
impl IntegrationEvent for BadSubject {
    const NAME: &'static str = "order.bad_subject";
    const VERSION: u32 = 1;
    const SUBJECT: txoutbox_core::EventSubject = txoutbox_core::EventSubject::Fixed("orders.*");
}

#[test]
fn hand_written_impls_are_validated() {
    let err = EventRegistry::builder()
        .register::<BadName>()
        .build()
        .unwrap_err();
    assert!(matches!(err, RegistryError::InvalidName { .. }), "{err:?}");
    let text = txoutbox_core::ErrorChain(&err).to_string();
    assert!(text.contains("event name `order placed`"), "{text}");
    let err = EventRegistry::builder()
        .register::<ZeroVersion>()
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            RegistryError::ZeroVersion {
                name: "order.zero",
                ..
            }
        ),
        "{err:?}"
    );
    let err = EventRegistry::builder()
        .register::<BadSubject>()
        .build()
        .unwrap_err();
    let text = txoutbox_core::ErrorChain(&err).to_string();
    assert!(text.contains("subject `orders.*`"), "{text}");
}
