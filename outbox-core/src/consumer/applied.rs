//! [`AppliedMessages`]: what a consumer has already applied, so that a
//! subscriber restarted after a crash can tell the messages still
//! outstanding from before the crash (to wait for them) from those it had
//! already handled.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;

use super::handler_error::BoxError;
use crate::id::MessageId;

/// The future [`AppliedMessages::applied`] returns.
pub type AppliedFuture =
    Pin<Box<dyn Future<Output = Result<HashSet<MessageId>, BoxError>> + Send + 'static>>;

/// A consumer's record of the messages whose effects it applied: the inbox
/// (`txoutbox_sea_orm::Inbox` implements it). A subscriber given one keeps
/// each aggregate's messages in order across its own crashes and restarts
/// (see `txoutbox_nats::SubscriberBuilder::keep_order`).
///
/// ```
/// use std::collections::HashSet;
/// use txoutbox_core::MessageId;
/// use txoutbox_core::consumer::{AppliedFuture, AppliedMessages};
///
/// /// Knows nothing applied: every earlier message is waited for.
/// struct Nothing;
///
/// impl AppliedMessages for Nothing {
///     fn applied(&self, _ids: Vec<MessageId>) -> AppliedFuture {
///         Box::pin(async { Ok(HashSet::new()) })
///     }
/// }
/// ```
pub trait AppliedMessages: Send + Sync + 'static {
    /// Those of `ids` whose effects this consumer has applied.
    fn applied(&self, ids: Vec<MessageId>) -> AppliedFuture;
}
