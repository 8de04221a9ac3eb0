//! The error every part and child returns.

/// The error of every part.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
