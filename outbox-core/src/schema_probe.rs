//! How `#[derive(IntegrationEvent)]` finds an event type's JSON Schema
//! without requiring one: "autoref specialization" on the concrete type the
//! derive is applied to (stable Rust; it works because the derive only
//! accepts non-generic types).
//!
//! The derive generates a function calling
//! `(&SchemaProbe::<Event>::new()).schema()` with both traits in scope.
//! Method resolution tries the receiver `&SchemaProbe<Event>` first, which
//! [`HasSchema`] matches when `Event: schemars::JsonSchema` and the
//! feature `schema` is on; otherwise it adds a reference and finds
//! [`NoSchema`], whose answer is `None`.

use std::marker::PhantomData;

/// The type whose schema is looked for.
pub struct SchemaProbe<T>(PhantomData<fn() -> T>);

impl<T> SchemaProbe<T> {
    /// A probe for `T`.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

/// Chosen when `T` implements `schemars::JsonSchema` (feature `schema`).
pub trait HasSchema {
    /// `T`'s JSON Schema.
    fn schema(&self) -> Option<serde_json::Value>;
}

#[cfg(feature = "schema")]
impl<T: schemars::JsonSchema> HasSchema for SchemaProbe<T> {
    fn schema(&self) -> Option<serde_json::Value> {
        crate::schema::json_schema::<T>()
    }
}

/// The fallback: no schema.
pub trait NoSchema {
    /// `None`.
    fn schema(&self) -> Option<serde_json::Value> {
        None
    }
}

impl<T> NoSchema for &SchemaProbe<T> {}
