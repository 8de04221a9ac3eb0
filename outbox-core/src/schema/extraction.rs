//! Where the schemas come from: a type's JSON Schema, and every schema a
//! registry holds.

use std::collections::BTreeMap;

use serde_json::Value;

#[cfg(doc)]
use crate::registry::EventRegistration;
use crate::registry::EventRegistry;

/// `T`'s JSON Schema, as a registration records it (see
/// [`EventRegistration::with_schema`]).
pub fn json_schema<T: schemars::JsonSchema>() -> Option<Value> {
    Some(
        schemars::SchemaGenerator::default()
            .into_root_schema_for::<T>()
            .to_value(),
    )
}

/// The schemas of a registry: name → version → schema. Registrations
/// without a schema are left out (see [`SchemaLock::check`](super::SchemaLock::check), which names
/// them).
pub fn schemas(registry: &EventRegistry) -> BTreeMap<String, BTreeMap<u32, Value>> {
    let mut schemas: BTreeMap<String, BTreeMap<u32, Value>> = BTreeMap::new();
    for registration in registry.iter() {
        if let Some(schema) = registration.schema() {
            schemas
                .entry(registration.name().to_owned())
                .or_default()
                .insert(registration.version(), schema);
        }
    }
    schemas
}
