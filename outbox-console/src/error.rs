//! [`ConsoleError`]: why the console could not read or change something.

use txoutbox_core::StoreError;
use txoutbox_nats::VerifyError;
use txoutbox_nats::stream_read::ReadError;
use txoutbox_sea_orm::OutboxError;

/// Why the console could not read or change something. Pages show it, one line with its causes; it is never
/// a panic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// The outbox table could not be read or changed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The inbox (held aggregates) could not be read or changed.
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// The stream could not be read.
    #[error(transparent)]
    StreamRead(#[from] ReadError),
    /// A verification could not compare the table with the stream (it
    /// could not read one of them).
    #[error(transparent)]
    Verify(#[from] VerifyError),
}
