//! The naming rules (`outbox-naming`, `txoutbox_core::naming`), subject
//! prefixes and partitions, and application headers: the input is a
//! candidate name; as a header, `name\nvalue`.
//!
//! Properties: each check accepts exactly what its documentation describes
//! (the models in `txoutbox_fuzz::rules`), the compile-time crate and the
//! start-up checks agree, an accepted event name under an accepted prefix
//! (partitioned or not) makes a valid subject, a partition is below the
//! count and the same every time; a header is accepted exactly when the
//! rules allow it, by `insert` and by serde alike, and NATS carries it.

#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use txoutbox_core::naming::{validate_event_name, validate_subject};
use txoutbox_core::{EventSubject, Headers, Partitions, SubjectPrefix, wire};
use txoutbox_fuzz::rules;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    names(text);
    prefixes(text);
    partitions(text, bytes.first().copied().unwrap_or(0));
    let (name, value) = text.split_once('\n').unwrap_or((text, "v"));
    headers(name, value);
});

fn names(text: &str) {
    let event_name = rules::is_event_name(text);
    assert_eq!(
        validate_event_name(text).is_ok(),
        event_name,
        "event name {text:?}"
    );
    assert_eq!(txoutbox_naming::check_event_name(text).is_ok(), event_name);
    let subject = rules::is_subject(text);
    assert_eq!(validate_subject(text).is_ok(), subject, "subject {text:?}");
    assert_eq!(txoutbox_naming::check_subject(text).is_ok(), subject);
    if event_name {
        let derived = EventSubject::Derived.resolve(&SubjectPrefix::default(), text);
        assert_eq!(derived, format!("events.{text}"));
        assert!(validate_subject(&derived).is_ok(), "{derived}");
        let partitioned = Partitions::subject("events", 4095, text);
        assert!(validate_subject(&partitioned).is_ok(), "{partitioned}");
    }
}

fn prefixes(text: &str) {
    let prefix = SubjectPrefix::new(text);
    assert_eq!(prefix.is_ok(), rules::is_subject(text), "prefix {text:?}");
    let Ok(prefix) = prefix else {
        return;
    };
    assert_eq!(prefix.to_string(), text);
    let subject = EventSubject::Derived.resolve(&prefix, "order.placed");
    assert_eq!(
        validate_subject(&subject).is_ok(),
        subject.len() <= 255,
        "{subject}"
    );
    assert_eq!(
        EventSubject::Fixed("audit.shop").resolve(&prefix, "order.placed"),
        "audit.shop"
    );
}

fn partitions(text: &str, first: u8) {
    let count = u32::from(first) * 16 + 1;
    let partitions = Partitions::new(count).expect("1..=4096 partitions");
    let k = partitions.of("order", text);
    assert!(k < partitions.count());
    assert_eq!(k, partitions.of("order", text));
    assert!(partitions.all().contains(&k));
    let owners = (0..3)
        .filter(|i| partitions.share(*i, 3).contains(&k))
        .count();
    assert_eq!(owners, 1, "partition {k} of {count} has one owner of three");
}

fn headers(name: &str, value: &str) {
    assert_eq!(
        wire::is_reserved(name),
        rules::is_reserved_header(name),
        "{name:?}"
    );
    let allowed = rules::is_application_header(name, value);
    let mut headers = Headers::new();
    let inserted = headers.insert(name, value);
    assert_eq!(
        inserted.is_ok(),
        allowed,
        "{name:?}: {value:?} -> {inserted:?}"
    );
    let map = BTreeMap::from([(name.to_owned(), value.to_owned())]);
    let json = serde_json::to_string(&map).expect("a map serializes");
    let read = serde_json::from_str::<Headers>(&json);
    assert_eq!(read.is_ok(), allowed);
    if allowed {
        assert_eq!(headers.get(name), Some(value));
        assert_eq!(read.ok(), Some(headers));
        assert!(rules::nats_can_carry(name, value), "{name:?}: {value:?}");
        assert!(rules::arrives_unchanged(value), "{value:?}");
    }
}
