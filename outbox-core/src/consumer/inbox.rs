//! [`ConsumerInbox`]: a consumer's inbox as a subscriber uses it.

use std::error::Error;
use std::time::Duration;

use super::applied::AppliedMessages;
use super::failure::FailureCause;
use super::group::{GroupFuture, InboxGroup};
use super::held::{HeldFuture, HeldMessages};
use super::lease::ReaderLease;

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

    /// Takes the reader lease `name` (a JetStream consumer's name) for
    /// `holder`, or renews it if `holder` has it, for `duration` by the
    /// database's clock; when another holder has it and it has not
    /// expired, says who ([`ReaderLease`]). `None` (the default): this
    /// inbox keeps no leases, and a subscriber reads without one (the
    /// broker's checks alone keep a second process away). Whether it is
    /// `Some` is decided without I/O (a subscriber asks, without awaiting
    /// the future, to learn whether the inbox keeps leases); the future
    /// does the work. An implementation should also refuse to commit an
    /// inbox transaction once the lease it last took is another's (a
    /// fencing check in the transaction): `txoutbox_sea_orm::Inbox` does.
    fn take_lease(
        &self,
        name: &str,
        holder: &str,
        duration: Duration,
    ) -> Option<HeldFuture<ReaderLease>> {
        let _ = (name, holder, duration);
        None
    }

    /// Gives up the reader lease `name` if `holder` has it, so another
    /// process may take it at once. The default does nothing.
    fn end_lease(&self, name: &str, holder: &str) -> HeldFuture<()> {
        let _ = (name, holder);
        Box::pin(async { Ok(()) })
    }
}
