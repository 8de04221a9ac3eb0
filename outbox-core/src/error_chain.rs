//! [`ErrorChain`]: an error and its sources on one line.

use std::error::Error;
use std::fmt;

/// Displays an error and its [`source`](Error::source) chain on one line,
/// `a: b: c`. The errors of this workspace print their own message only and
/// give their cause through `source()` (so `anyhow`'s `{:#}` says each
/// once); log them through this to keep the causes:
/// `tracing::warn!(error = %ErrorChain(&err), "...")`.
///
/// ```
/// use txoutbox_core::ErrorChain;
/// let err = txoutbox_core::StoreError::new("claiming", std::io::Error::other("connection reset"));
/// assert_eq!(ErrorChain(&err).to_string(), "outbox store: claiming: connection reset");
/// ```
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn Error + 'a));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
