//! [`Outbox::transaction`](crate::Outbox::transaction)'s parts: the unit of
//! work an attempt's closure owns ([`TransactionUnit`]) and when an attempt
//! is run again ([`TransactionRetry`]).
//!
//! Why the closure gets its unit of work **by value**: a closure taking
//! `&mut UnitOfWork` needs a higher-ranked bound (`for<'u> FnMut(&'u mut
//! UnitOfWork) -> ..`, or `AsyncFnMut(&mut UnitOfWork)`), and with either,
//! rustc (1.95) cannot prove the caller's future `Send`: inside
//! `tokio::spawn` or an axum handler it fails with "implementation of
//! `Send` is not general enough" (or of `AsyncFnMut`). An owned argument
//! has no lifetime to quantify over: `FnMut(TransactionUnit) -> Fut` is a
//! plain bound, the future is `Send` whenever what it holds is, and both
//! `async |uow| { .. }` and `|uow| async move { .. }` fit it. The unit
//! comes back to the library when the closure's future completes (its
//! arguments are dropped then), which commits it.

use std::ops::{Deref, DerefMut};

use tokio::sync::oneshot;

use crate::error::OutboxError;
use crate::unit_of_work::UnitOfWork;

/// How many times [`Outbox::transaction`](crate::Outbox::transaction) runs
/// a unit of work at most, by default.
pub const TRANSACTION_ATTEMPTS: u32 = 5;

/// The unit of work of one attempt of
/// [`Outbox::transaction`](crate::Outbox::transaction), owned by its
/// closure: it dereferences to [`UnitOfWork`] (`load`, `save`, `delete`,
/// `enqueue`, `connection`, and any `&mut UnitOfWork` helper of yours), and
/// goes back to the library when the closure's future completes, which
/// commits it (or rolls it back, if the closure failed). It cannot be
/// committed by hand: [`UnitOfWork::commit`] takes the unit by value.
///
/// Keep it inside the closure's future: one moved elsewhere (into a task,
/// or returned) cannot be committed, and the transaction fails with
/// [`OutboxError::UnitOfWorkKept`].
///
/// ```no_run
/// # use txoutbox_sea_orm::{OutboxError, UnitOfWork};
/// # async fn run(outbox: txoutbox_sea_orm::Outbox) -> Result<(), OutboxError> {
/// async fn reserve(uow: &mut UnitOfWork) -> Result<(), OutboxError> {
///     use sea_orm::ConnectionTrait;
///     uow.connection().await?.execute_unprepared("UPDATE stock SET n = n - 1").await?;
///     Ok(())
/// }
/// outbox.transaction(async |mut uow| reserve(&mut uow).await).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TransactionUnit {
    /// `Some` until dropped.
    uow: Option<UnitOfWork>,
    back: Option<oneshot::Sender<UnitOfWork>>,
}

impl TransactionUnit {
    /// `uow`, and where it comes back once its holder drops it.
    pub(crate) fn new(uow: UnitOfWork) -> (Self, Returned) {
        let (back, returned) = oneshot::channel();
        let unit = Self {
            uow: Some(uow),
            back: Some(back),
        };
        (unit, Returned(returned))
    }
}

impl Deref for TransactionUnit {
    type Target = UnitOfWork;

    fn deref(&self) -> &UnitOfWork {
        self.uow
            .as_ref()
            .expect("a TransactionUnit holds its unit of work until dropped")
    }
}

impl DerefMut for TransactionUnit {
    fn deref_mut(&mut self) -> &mut UnitOfWork {
        self.uow
            .as_mut()
            .expect("a TransactionUnit holds its unit of work until dropped")
    }
}

impl Drop for TransactionUnit {
    fn drop(&mut self) {
        if let (Some(uow), Some(back)) = (self.uow.take(), self.back.take()) {
            // The library stopped waiting (its future was dropped): the
            // unit is dropped here, which rolls it back.
            let _ = back.send(uow);
        }
    }
}

/// Where a [`TransactionUnit`] comes back.
pub(crate) struct Returned(oneshot::Receiver<UnitOfWork>);

impl Returned {
    /// The unit, once the closure's future completed.
    pub(crate) fn take(mut self) -> Result<UnitOfWork, OutboxError> {
        self.0.try_recv().map_err(|_| OutboxError::UnitOfWorkKept)
    }
}

/// When [`Outbox::transaction_with`](crate::Outbox::transaction_with) runs a
/// failed attempt again, and how many attempts it makes (by default
/// [`TRANSACTION_ATTEMPTS`]). `E` is the closure's error type.
///
/// - [`on_conflict`](TransactionRetry::on_conflict) (the default, what
///   [`Outbox::transaction`](crate::Outbox::transaction) uses): when the
///   attempt's unit of work saw a retryable failure
///   ([`UnitOfWork::saw_retryable_failure`], or a commit that failed with
///   [`OutboxError::is_retryable`]), whatever error the closure made of it;
///   never on an error of the closure's own.
/// - [`when`](TransactionRetry::when): when a predicate on the error says so.
/// - [`never`](TransactionRetry::never): one attempt.
///
/// ```
/// use txoutbox_sea_orm::{OutboxError, TransactionRetry};
///
/// #[derive(Debug)]
/// enum AppError { Busy, Outbox(OutboxError) }
/// impl From<OutboxError> for AppError {
///     fn from(err: OutboxError) -> Self { AppError::Outbox(err) }
/// }
///
/// // Also retry the application's own `Busy`, at most three attempts.
/// let retry = TransactionRetry::when(|err: &AppError| match err {
///     AppError::Busy => true,
///     AppError::Outbox(err) => err.is_retryable(),
/// })
/// .attempts(3);
/// # let _ = retry;
/// ```
pub struct TransactionRetry<E> {
    attempts: u32,
    rule: Rule<E>,
}

/// A predicate on the closure's error.
type Predicate<E> = Box<dyn Fn(&E) -> bool + Send + Sync>;

enum Rule<E> {
    Conflict,
    Never,
    When(Predicate<E>),
}

impl<E> TransactionRetry<E> {
    /// Runs the attempt again when its unit of work saw a retryable
    /// failure (the default): see the [type's docs](TransactionRetry).
    pub fn on_conflict() -> Self {
        Self {
            attempts: TRANSACTION_ATTEMPTS,
            rule: Rule::Conflict,
        }
    }

    /// Runs the attempt again when `retry` says so of its error (a failed
    /// commit reaches it converted with `E::from`).
    ///
    /// ```
    /// # use txoutbox_sea_orm::{OutboxError, TransactionRetry};
    /// let retry = TransactionRetry::when(OutboxError::is_retryable);
    /// # let _: TransactionRetry<OutboxError> = retry;
    /// ```
    pub fn when(retry: impl Fn(&E) -> bool + Send + Sync + 'static) -> Self {
        Self {
            attempts: TRANSACTION_ATTEMPTS,
            rule: Rule::When(Box::new(retry)),
        }
    }

    /// One attempt, whatever fails.
    ///
    /// ```
    /// # use txoutbox_sea_orm::{OutboxError, TransactionRetry};
    /// let once: TransactionRetry<OutboxError> = TransactionRetry::never();
    /// ```
    pub fn never() -> Self {
        Self {
            attempts: 1,
            rule: Rule::Never,
        }
    }

    /// At most `attempts` attempts (at least one).
    ///
    /// ```
    /// # use txoutbox_sea_orm::{OutboxError, TransactionRetry};
    /// let retry: TransactionRetry<OutboxError> = TransactionRetry::on_conflict().attempts(10);
    /// ```
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }

    /// The most attempts this makes.
    pub(crate) fn max_attempts(&self) -> u32 {
        self.attempts
    }

    /// Whether a failed attempt (`err`; `saw_retryable`: its unit of work
    /// saw a retryable failure) is run again.
    pub(crate) fn retries(&self, err: &E, saw_retryable: bool) -> bool {
        match &self.rule {
            Rule::Conflict => saw_retryable,
            Rule::Never => false,
            Rule::When(retry) => retry(err),
        }
    }
}

impl<E> Default for TransactionRetry<E> {
    fn default() -> Self {
        Self::on_conflict()
    }
}

impl<E> std::fmt::Debug for TransactionRetry<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rule = match self.rule {
            Rule::Conflict => "on_conflict",
            Rule::Never => "never",
            Rule::When(_) => "when(..)",
        };
        f.debug_struct("TransactionRetry")
            .field("attempts", &self.attempts)
            .field("rule", &rule)
            .finish()
    }
}
