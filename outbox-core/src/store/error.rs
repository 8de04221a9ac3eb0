//! [`StoreError`]: a store operation failed.

use super::missing_schema::MissingSchema;

/// A store operation failed (the database is unreachable, a statement was
/// rejected, a row could not be read back).
#[derive(Debug, thiserror::Error)]
#[error("outbox store: {message}")]
pub struct StoreError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl StoreError {
    /// An error with a cause.
    pub fn new(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// The table is missing, or lacks columns (see
    /// [`OutboxStore::check_schema`](super::OutboxStore::check_schema)).
    ///
    /// ```
    /// use txoutbox_core::store::{MissingSchema, StoreError};
    /// let missing = MissingSchema::Table { table: "outbox_messages".into(), remedy: "run `outbox migrate`".into() };
    /// let err = StoreError::from(missing.clone());
    /// assert_eq!(err.missing_schema(), Some(&missing));
    /// ```
    pub fn missing_schema(&self) -> Option<&MissingSchema> {
        self.source.as_deref()?.downcast_ref::<MissingSchema>()
    }

    /// An error without a cause.
    pub fn msg(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }
}

impl From<MissingSchema> for StoreError {
    fn from(missing: MissingSchema) -> Self {
        Self::new("schema check", missing)
    }
}
