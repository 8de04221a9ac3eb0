//! A lock on the wire contract (feature `schema`): the JSON Schema of every
//! registered (name, version), committed as a lock file, and a check that
//! fails when a published version's payload changes in a way its consumers
//! cannot read.
//!
//! Consumers in other services (and other languages) depend on each event's
//! JSON shape per (name, version). Once a version is published, its shape
//! may only grow in ways every reader takes in stride; anything else needs
//! a **new version** with an upcast (`#[event(version = 2, upcast_from =
//! OrderPlacedV1)]`), so old messages and old consumers keep working.
//!
//! # Where the schemas come from
//!
//! `#[derive(IntegrationEvent)]` records the payload's schema in the
//! type's [`EventRegistration`](crate::registry::EventRegistration) when the type also derives
//! [`schemars::JsonSchema`] and this feature is on: nothing else to write,
//! and types without `JsonSchema` still compile (the derive looks for the
//! impl without requiring it). A hand-written `IntegrationEvent` adds
//! `.with_schema(txoutbox_core::schema::json_schema::<Self>)` to its
//! registration.
//!
//! # The lock file
//!
//! [`SchemaLock`] keeps `{ "name": { "version": schema } }` in a JSON file
//! (e.g. `events.lock.json`, committed beside the events). One test
//! guards it:
//!
//! ```no_run
//! # use txoutbox_core::EventRegistry;
//! # use txoutbox_core::schema::SchemaLock;
//! #[test]
//! fn the_wire_contract_holds() {
//!     let registry = EventRegistry::from_inventory().unwrap();
//!     SchemaLock::new(concat!(env!("CARGO_MANIFEST_DIR"), "/events.lock.json"))
//!         .assert(&registry);
//! }
//! ```
//!
//! [`assert`](SchemaLock::assert) fails when a locked (name, version)
//! changed incompatibly, naming each change and what to do. Otherwise it
//! writes the new state: new (name, version)s and compatible changes are
//! added to the file (commit it). On CI (`CI` set) it writes nothing and
//! fails instead when the file is not up to date. With
//! `OUTBOX_UPDATE_SCHEMA_LOCK=1` it accepts every change and rewrites the
//! file: for a version that was never published.
//!
//! # What is compatible
//!
//! Messages of one version written before and after a change sit side by
//! side in the outbox table and the stream, and consumers built before and
//! after it read both. So, per (name, version):
//!
//! | change | |
//! |---|---|
//! | a new optional field (`Option<T>`, `#[serde(default)]`) | compatible: old readers ignore it, new readers default it |
//! | descriptions, titles, examples | compatible |
//! | a field removed | **incompatible**: readers that need it fail, or silently lose it |
//! | a field's type changed (also: an enum's variants, a number's format) | **incompatible** |
//! | a required field added, or an optional one made required | **incompatible**: messages written before lack it |
//! | a required field made optional | **incompatible**: old readers need it |
//! | a field added to a type that rejects unknown fields (`deny_unknown_fields`) | **incompatible** |
//! | a (name, version) no longer registered | **incompatible**: its messages can no longer be decoded |

mod comparison;
mod extraction;
mod incompatibility;
mod lock_file;
mod report;

pub use comparison::compare;
pub use extraction::{json_schema, schemas};
pub use incompatibility::{Incompatibility, IncompatibleKind};
pub use lock_file::{LockError, SchemaLock};
pub use report::{LockReport, check_against};

/// The `schemars` this crate reads schemas with (a public dependency:
/// derive `JsonSchema` with the same major version).
pub use schemars;

/// The environment variable that makes [`SchemaLock::assert`] accept every
/// change and rewrite the lock file.
pub const UPDATE_ENV: &str = "OUTBOX_UPDATE_SCHEMA_LOCK";
