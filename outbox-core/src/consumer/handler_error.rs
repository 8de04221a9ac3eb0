//! [`HandlerError`]: how a message handler says it failed.

use std::error::Error;
use std::fmt;

/// A boxed error that can cross tasks.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// Why a message handler did not succeed, and whether trying again can help.
///
/// - [`HandlerError::retry`] (and `?` on any error type): a transient failure
///   (a database down, a timeout). The message is redelivered later, with a
///   delay that grows with each delivery, until the consumer's delivery limit;
///   then it is dead-lettered with this error as the reason.
/// - [`HandlerError::permanent`]: the message can never be handled (it breaks
///   an invariant, refers to something that will not exist). It is
///   dead-lettered at once.
/// - [`HandlerError::unavailable`]: something the handler needs is away (its
///   database is down, failing over, read-only). Not the message's fault:
///   the subscriber pauses, keeps the message, spends none of its
///   deliveries, and applies it again once the outage is over. (Errors of
///   an inbox's own database are told apart without it: see
///   [`ConsumerInbox::cause_of`](super::ConsumerInbox::cause_of).)
///
/// Like `anyhow::Error`, it converts from every `std::error::Error`, so
/// handlers can use `?` freely; for that reason it does not implement
/// `std::error::Error` itself.
///
/// ```
/// use txoutbox_core::HandlerError;
///
/// fn parse(total: &str) -> Result<u64, HandlerError> {
///     let cents: u64 = total.parse()?;                 // retried if it fails
///     if cents == 0 {
///         return Err(HandlerError::permanent("an order total of zero")); // dead-lettered now
///     }
///     Ok(cents)
/// }
/// assert!(!parse("x").unwrap_err().is_permanent());
/// assert!(parse("0").unwrap_err().is_permanent());
/// assert_eq!(parse("0").unwrap_err().to_string(), "an order total of zero");
/// ```
pub struct HandlerError {
    error: BoxError,
    kind: Kind,
}

/// What a [`HandlerError`] asks of the subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Retry,
    Permanent,
    Unavailable,
}

impl HandlerError {
    /// A failure worth retrying: the message is redelivered later.
    pub fn retry(error: impl Into<BoxError>) -> Self {
        Self {
            error: error.into(),
            kind: Kind::Retry,
        }
    }

    /// A failure no retry can fix: the message is dead-lettered at once.
    pub fn permanent(error: impl Into<BoxError>) -> Self {
        Self {
            error: error.into(),
            kind: Kind::Permanent,
        }
    }

    /// Something the handler needs is away (a database that is down or
    /// failing over, a service that does not answer): the subscriber pauses
    /// and applies the message again when the outage is over, spending none
    /// of its deliveries.
    ///
    /// ```
    /// use txoutbox_core::HandlerError;
    ///
    /// let err = HandlerError::unavailable("the ledger service does not answer");
    /// assert!(err.is_unavailable() && !err.is_permanent());
    /// ```
    pub fn unavailable(error: impl Into<BoxError>) -> Self {
        Self {
            error: error.into(),
            kind: Kind::Unavailable,
        }
    }

    /// Whether the message should be dead-lettered without further attempts.
    pub fn is_permanent(&self) -> bool {
        self.kind == Kind::Permanent
    }

    /// Whether the handler said something it needs is away (see
    /// [`unavailable`](Self::unavailable)).
    pub fn is_unavailable(&self) -> bool {
        self.kind == Kind::Unavailable
    }

    /// The underlying error.
    pub fn get_ref(&self) -> &(dyn Error + Send + Sync + 'static) {
        self.error.as_ref()
    }

    /// The underlying error, by value.
    pub fn into_inner(self) -> BoxError {
        self.error
    }
}

impl<E: Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(error: E) -> Self {
        Self::retry(error)
    }
}

/// `?` from a handler's result into a boxed error (a test's or `main`'s
/// return type), as `anyhow::Error` converts: the underlying error with its
/// sources; whether it was permanent is the handler's business and is
/// dropped.
///
/// ```
/// use txoutbox_core::HandlerError;
///
/// fn handle(total: &str) -> Result<u64, HandlerError> {
///     Ok(total.parse()?)
/// }
///
/// fn a_test(total: &str) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
///     Ok(handle(total)? + 1)
/// }
/// assert_eq!(a_test("12").unwrap(), 13);
/// assert_eq!(a_test("x").unwrap_err().to_string(), "invalid digit found in string");
/// ```
impl From<HandlerError> for BoxError {
    fn from(error: HandlerError) -> Self {
        error.error
    }
}

/// As for `Box<dyn Error + Send + Sync>`: `?` in a function returning
/// `Result<_, Box<dyn std::error::Error>>`.
impl From<HandlerError> for Box<dyn Error + 'static> {
    fn from(error: HandlerError) -> Self {
        error.error
    }
}

/// The error and its sources, joined by `: `.
impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.error)?;
        let mut source = self.error.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerError")
            .field("kind", &self.kind)
            .field("error", &self.error)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    fn handled(outcome: Result<(), HandlerError>) -> Result<(), Box<dyn Error>> {
        outcome?;
        Ok(())
    }

    fn handled_across_tasks(outcome: Result<(), HandlerError>) -> Result<(), BoxError> {
        outcome?;
        Ok(())
    }

    #[test]
    fn question_mark_turns_a_handler_error_into_a_boxed_error_with_its_sources() {
        let failed = || {
            Err(HandlerError::permanent(Outer(std::io::Error::other(
                "inner",
            ))))
        };
        let boxed = handled(failed()).unwrap_err();
        assert_eq!(boxed.to_string(), "outer");
        assert_eq!(
            boxed.source().map(ToString::to_string).as_deref(),
            Some("inner")
        );
        let boxed = handled_across_tasks(failed()).unwrap_err();
        assert!(boxed.downcast_ref::<Outer>().is_some());
        assert!(handled(Ok(())).is_ok());
    }

    #[test]
    fn display_walks_the_source_chain() {
        let error: HandlerError = Outer(std::io::Error::other("inner")).into();
        assert_eq!(error.to_string(), "outer: inner");
        assert!(!error.is_permanent());
    }
}
