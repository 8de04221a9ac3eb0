//! [`ConsumerInbox`]: a consumer's inbox as a subscriber uses it.

use std::error::Error;
use std::time::Duration;

use super::applied::AppliedMessages;
use super::failure::FailureCause;
use super::group::{GroupFuture, InboxGroup};
use super::held::{HeldFuture, HeldMessages};

/// A consumer's inbox as a typed subscriber uses it: the messages it
/// applied ([`AppliedMessages`]: the restart guard that keeps each
/// aggregate's messages in order across crashes), the aggregates it holds
/// behind a message it could not apply ([`HeldMessages`]), its schema check
/// and its cleanup. `txoutbox_sea_orm::Inbox` implements it; a subscriber
/// gets it from the inbox's handlers, so no separate call wires it.
pub trait ConsumerInbox: AppliedMessages + HeldMessages {
    /// The consumer name the inbox records rows under.
    fn consumer(&self) -> &str;

    /// Checks that the tables the inbox needs exist, with the columns it
    /// uses; the error names what to run when they do not. A subscriber
    /// calls it when it is built.
    fn check_schema(&self) -> HeldFuture<()>;

    /// Deletes rows of messages applied more than `older_than` ago, at
    /// most `batch_size` per statement; returns how many.
    fn purge_applied(&self, older_than: Duration, batch_size: u32) -> HeldFuture<u64>;

    /// Begins a transaction in which a subscriber applies a group of
    /// messages ([`InboxGroup`]); `None` (the default) when this inbox
    /// applies one message per transaction only.
    fn begin_group(&self) -> Option<GroupFuture<'static, Box<dyn InboxGroup>>> {
        None
    }

    /// Asks the database to end any transaction of this inbox that sits
    /// idle (its process frozen, a handler waiting on something else with
    /// the transaction open) longer than `limit`, so the rows it holds go
    /// to the process its messages went to. A subscriber calls it when it
    /// is built, with the time after which JetStream gives its messages to
    /// another process (its ack wait, unless set otherwise). Called for
    /// several subscribers, the longest limit holds. The default does
    /// nothing (an inbox without such a bound).
    fn limit_idle_transactions(&self, limit: Duration) {
        let _ = limit;
    }

    /// Whose fault `error` is: an error (or a cause in its source chain) of
    /// this inbox's database that says the database is away or that other
    /// transactions were in the way, or the handler's own. A subscriber
    /// asks it for every failed attempt at applying a message through this
    /// inbox, so that an outage or a deadlock spends no delivery. The
    /// default (an inbox that cannot tell) blames the handler.
    fn cause_of(&self, error: &(dyn Error + 'static)) -> FailureCause {
        let _ = error;
        FailureCause::Handler
    }

    /// Checks that the inbox's database answers and takes writes (not a
    /// read-only replica): what a paused subscriber asks, every second or
    /// two, to know when to go on. The default answers `Ok` at once.
    fn probe(&self) -> HeldFuture<()> {
        Box::pin(async { Ok(()) })
    }
}
