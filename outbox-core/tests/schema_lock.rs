//! The lock on the wire contract (feature `schema`): a compatible change
//! passes, each incompatible kind fails with its message, new versions are
//! added to the lock.
#![cfg(feature = "schema")]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use txoutbox_core::schema::{IncompatibleKind, SchemaLock, check_against};
use txoutbox_core::{EventRegistry, IntegrationEvent};

/// The published shape: `order.placed` v1.
mod published {
    use super::*;
    #[derive(Serialize, Deserialize, JsonSchema, IntegrationEvent)]
    #[event(name = "order.placed")]
    pub(crate) struct OrderPlaced {
        pub(crate) order_id: String,
        pub(crate) total_cents: u64,
        pub(crate) note: Option<String>,
        pub(crate) customer: Customer,
    }
    #[derive(Serialize, Deserialize, JsonSchema)]
    pub(crate) struct Customer {
        pub(crate) id: String,
        pub(crate) email: String,
    }
}

/// Compatible: a new optional field, a new optional nested field, docs.
mod optional_added {
    use super::*;
    /// An order was placed (a doc comment is only a description).
    #[derive(Serialize, Deserialize, JsonSchema, IntegrationEvent)]
    #[event(name = "order.placed")]
    pub(crate) struct OrderPlaced {
        pub(crate) order_id: String,
        pub(crate) total_cents: u64,
        pub(crate) note: Option<String>,
        pub(crate) customer: Customer,
        pub(crate) coupon: Option<String>,
        #[serde(default)]
        pub(crate) gift: bool,
    }
    #[derive(Serialize, Deserialize, JsonSchema)]
    pub(crate) struct Customer {
        pub(crate) id: String,
        pub(crate) email: String,
        pub(crate) phone: Option<String>,
    }
}

mod field_removed {
    use super::*;
    #[derive(Serialize, Deserialize, JsonSchema, IntegrationEvent)]
    #[event(name = "order.placed")]
    pub(crate) struct OrderPlaced {
        pub(crate) order_id: String,
        pub(crate) note: Option<String>,
        pub(crate) customer: super::published::Customer,
    }
}

mod type_changed {
    use super::*;
    #[derive(Serialize, Deserialize, JsonSchema, IntegrationEvent)]
    #[event(name = "order.placed")]
    pub(crate) struct OrderPlaced {
        pub(crate) order_id: String,
        pub(crate) total_cents: String,
        pub(crate) note: Option<String>,
        pub(crate) customer: super::published::Customer,
    }
}

mod required_added {
    use super::*;
    #[derive(Serialize, Deserialize, JsonSchema, IntegrationEvent)]
    #[event(name = "order.placed")]
    pub(crate) struct OrderPlaced {
        pub(crate) order_id: String,
        pub(crate) total_cents: u64,
        pub(crate) note: Option<String>,
        pub(crate) customer: super::published::Customer,
        pub(crate) currency: String,
    }
}

mod nested_removed {
    use super::*;
    #[derive(Serialize, Deserialize, JsonSchema, IntegrationEvent)]
    #[event(name = "order.placed")]
    pub(crate) struct OrderPlaced {
        pub(crate) order_id: String,
        pub(crate) total_cents: u64,
        pub(crate) note: Option<String>,
        pub(crate) customer: Customer,
    }
    #[derive(Serialize, Deserialize, JsonSchema)]
    pub(crate) struct Customer {
        pub(crate) id: String,
    }
}

mod made_required {
    use super::*;
    #[derive(Serialize, Deserialize, JsonSchema, IntegrationEvent)]
    #[event(name = "order.placed")]
    pub(crate) struct OrderPlaced {
        pub(crate) order_id: String,
        pub(crate) total_cents: u64,
        pub(crate) note: String,
        pub(crate) customer: super::published::Customer,
    }
}

/// The right way: v1 kept, the change published as v2 with an upcast.
mod next_version {
    use super::*;
    #[derive(Serialize, Deserialize, JsonSchema, IntegrationEvent)]
    #[event(name = "order.placed", version = 2, upcast_from = published::OrderPlaced)]
    pub(crate) struct OrderPlaced {
        pub(crate) order_id: String,
        pub(crate) total: String,
    }
    impl From<published::OrderPlaced> for OrderPlaced {
        fn from(v1: published::OrderPlaced) -> Self {
            Self {
                order_id: v1.order_id,
                total: v1.total_cents.to_string(),
            }
        }
    }
}

/// An event without `JsonSchema`: it still derives `IntegrationEvent`.
#[derive(Serialize, Deserialize, IntegrationEvent)]
#[event(name = "order.archived")]
struct OrderArchived {
    order_id: String,
}

fn registry<E: IntegrationEvent>() -> EventRegistry {
    EventRegistry::builder()
        .register::<E>()
        .build()
        .expect("registry")
}

fn lock_of<E: IntegrationEvent>() -> Value {
    check_against(&json!({}), &registry::<E>()).lock
}

/// The incompatible changes of `E` against the published lock, as text.
fn changes<E: IntegrationEvent>() -> Vec<String> {
    let report = check_against(&lock_of::<published::OrderPlaced>(), &registry::<E>());
    assert!(report.added.is_empty() && report.changed.is_empty());
    report
        .incompatible
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_derive_records_the_schema_of_json_schema_types_only() {
    let schema = published::OrderPlaced::REGISTRATION
        .schema()
        .expect("a JsonSchema type has a schema");
    assert_eq!(
        schema["required"],
        json!(["order_id", "total_cents", "customer"])
    );
    assert!(OrderArchived::REGISTRATION.schema().is_none());
}

#[test]
fn an_unchanged_registry_is_up_to_date() {
    let report = check_against(
        &lock_of::<published::OrderPlaced>(),
        &registry::<published::OrderPlaced>(),
    );
    assert!(report.is_ok() && report.is_up_to_date(), "{report}");
}

#[test]
fn optional_fields_and_docs_are_compatible() {
    let report = check_against(
        &lock_of::<published::OrderPlaced>(),
        &registry::<optional_added::OrderPlaced>(),
    );
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.changed, [("order.placed".to_owned(), 1)]);
    assert!(!report.is_up_to_date());
}

#[test]
fn a_removed_field_fails() {
    assert_eq!(
        changes::<field_removed::OrderPlaced>(),
        ["`order.placed` v1: field `/total_cents` removed"]
    );
    assert_eq!(
        changes::<nested_removed::OrderPlaced>(),
        ["`order.placed` v1: field `/customer/email` removed"]
    );
}

#[test]
fn a_changed_type_fails() {
    assert_eq!(
        changes::<type_changed::OrderPlaced>(),
        [
            "`order.placed` v1: type of `/total_cents` changed from \"integer\" (uint64) to \"string\""
        ]
    );
}

#[test]
fn an_added_required_field_fails() {
    assert_eq!(
        changes::<required_added::OrderPlaced>(),
        ["`order.placed` v1: required field `/currency` added"]
    );
    let made_required = changes::<made_required::OrderPlaced>();
    assert_eq!(
        made_required[0],
        "`order.placed` v1: required field `/note` added"
    );
    assert!(made_required[1].starts_with("`order.placed` v1: type of `/note` changed"));
}

#[test]
fn a_field_added_to_a_closed_type_fails() {
    let locked = json!({ "e": { "1": {
        "type": "object", "additionalProperties": false,
        "properties": { "a": { "type": "string" } }, "required": ["a"]
    }}});
    let current = json!({
        "type": "object", "additionalProperties": false,
        "properties": { "a": { "type": "string" }, "b": { "type": ["string", "null"] } },
        "required": ["a"]
    });
    let found = txoutbox_core::schema::compare("e", 1, &locked["e"]["1"], &current);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].kind, IncompatibleKind::FieldAddedToClosedType);
}

#[test]
fn a_new_version_is_added_and_an_unregistered_one_fails() {
    let v2 = EventRegistry::builder()
        .register::<next_version::OrderPlaced>()
        .build()
        .expect("registry");
    let report = check_against(&lock_of::<published::OrderPlaced>(), &v2);
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.added, [("order.placed".to_owned(), 2)]);
    assert!(report.lock["order.placed"]["1"].is_object());
    assert!(report.lock["order.placed"]["2"].is_object());

    let only_v2 = check_against(&report.lock, &registry::<OrderArchived>());
    let text = only_v2.to_string();
    assert!(
        text.contains("`order.placed` v1 is locked but no longer registered"),
        "{text}"
    );
    assert!(text.contains("events without a JSON Schema"), "{text}");
}

#[test]
fn the_lock_file_is_written_checked_and_explained() {
    let dir = std::env::temp_dir().join(format!("outbox-schema-lock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let lock = SchemaLock::new(dir.join("events.lock.json"));

    // A missing file is an empty lock: every version is added.
    let first = lock
        .check(&registry::<published::OrderPlaced>())
        .expect("check");
    assert_eq!(first.added, [("order.placed".to_owned(), 1)]);
    lock.update(&registry::<published::OrderPlaced>())
        .expect("update");
    let text = std::fs::read_to_string(lock.path()).expect("written");
    assert!(text.contains("\"order.placed\"") && text.contains("\"total_cents\""));
    assert!(
        lock.check(&registry::<published::OrderPlaced>())
            .expect("check")
            .is_up_to_date()
    );

    // An incompatible change fails with what changed and what to do.
    let failure =
        std::panic::catch_unwind(|| lock.assert(&registry::<field_removed::OrderPlaced>()))
            .expect_err("an incompatible change fails");
    let message = failure
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        message.contains("field `/total_cents` removed"),
        "{message}"
    );
    assert!(message.contains("new version with an upcast"), "{message}");
    assert_eq!(std::fs::read_to_string(lock.path()).expect("kept"), text);

    // `update` accepts it (a version never published).
    let report = lock
        .update(&registry::<field_removed::OrderPlaced>())
        .expect("update");
    assert_eq!(report.incompatible.len(), 1);
    assert!(
        lock.check(&registry::<field_removed::OrderPlaced>())
            .expect("check")
            .is_up_to_date()
    );

    std::fs::write(lock.path(), "[]").expect("write");
    let err = lock
        .check(&registry::<published::OrderPlaced>())
        .expect_err("malformed");
    assert!(err.to_string().contains("is not `{ \"name\""), "{err}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}
