//! [`VerifyError`]: why a verification could not run to its end.

use txoutbox_core::StoreError;

use crate::stream_read::ReadError;

/// Why [`verify_stream`](crate::verify_stream) could not compare: the table
/// or the stream could not be read. (Discrepancies are not errors: they are
/// the [`VerifyOutcome`](crate::VerifyOutcome)'s report.)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The outbox table could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stream could not be read.
    #[error(transparent)]
    StreamRead(#[from] ReadError),
}
