//! The schema lock file (`txoutbox_core::schema::SchemaLock`), whatever
//! the file holds, checked against a registry with versions, an enum and a
//! recursive payload.
//!
//! Properties: a file that is not `{ "name": { "version": schema } }` is
//! refused as malformed (never an I/O error, never a panic or a loop); a
//! report's lock is the registry's schemas whatever the file said; what it
//! calls added, changed or unregistered is so; the lock it would write is
//! up to date, and `update` leaves a file that is.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use txoutbox_core::schema::{IncompatibleKind, LockError, SchemaLock, check_against};
use txoutbox_fuzz::events;

fuzz_target!(|bytes: &[u8]| {
    let registry = events::registry();
    let lock = SchemaLock::new(file());
    std::fs::write(lock.path(), bytes).expect("the lock file is written");
    let report = match lock.check(registry) {
        Ok(report) => report,
        Err(LockError::Malformed { .. }) => {
            assert!(!well_formed(bytes), "a well-formed lock was refused");
            return;
        }
        Err(other) => panic!("reading an existing file: {other:?}"),
    };
    assert!(well_formed(bytes), "a malformed lock was read");
    assert_eq!(
        report.lock,
        schemas(),
        "the lock to write is the registry's"
    );
    assert!(report.without_schema.is_empty());
    let locked: Value = serde_json::from_slice(bytes).expect("a read lock is JSON");
    for (name, version) in &report.added {
        assert!(registry.get(name, *version).is_some());
        assert!(
            locked
                .get(name)
                .and_then(|v| v.get(version.to_string()))
                .is_none()
        );
    }
    for (name, version) in &report.changed {
        assert!(registry.get(name, *version).is_some());
        assert!(!report.added.contains(&(name.clone(), *version)));
    }
    for change in &report.incompatible {
        let registered = registry.get(&change.name, change.version).is_some();
        assert_eq!(
            matches!(change.kind, IncompatibleKind::VersionUnregistered),
            !registered
        );
    }
    let relocked = check_against(&report.lock, registry);
    assert!(relocked.is_up_to_date() && relocked.is_ok(), "{relocked}");
    lock.update(registry).expect("the lock is rewritten");
    assert!(
        lock.check(registry)
            .expect("a written lock reads")
            .is_up_to_date()
    );
});

/// The file this process fuzzes, in a directory of its own.
fn file() -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
        .path()
        .join("events.lock.json")
}

/// The registry's schemas: the lock checked against an empty file.
fn schemas() -> Value {
    check_against(&json!({}), events::registry()).lock
}

/// The documented shape: an object of objects whose keys are versions.
fn well_formed(bytes: &[u8]) -> bool {
    let Ok(Value::Object(names)) = serde_json::from_slice::<Value>(bytes) else {
        return false;
    };
    names.values().all(|versions| {
        versions
            .as_object()
            .is_some_and(|v| v.keys().all(|k| k.parse::<u32>().is_ok()))
    })
}
