//! The open group transactions of this process's inboxes, by
//! [`GroupKey`]: where a subscriber's group ([`OpenGroup`]) and the inbox's
//! handlers meet without the transaction passing through the subscriber.
//!
//! The subscriber holds an [`OpenGroup`] (a `Box<dyn InboxGroup>`, which
//! names its transaction by key) and hands it to the inbox's handlers
//! ([`GroupedHandler::call_in_group`](txoutbox_core::consumer::GroupedHandler::call_in_group)).
//! A handler borrows the [`GroupTransaction`] from here by that key
//! ([`Lent`]) for as long as it runs, with the group borrowed mutably the
//! whole time, and gives it back when done: typed where it is made and
//! where it is used, with no downcast (the reasoning is in
//! [`txoutbox_core::consumer::GroupedHandler`]'s module). The registry is
//! the process's, not one [`Inbox`](super::Inbox)'s, so a subscriber whose
//! handlers come from two `Inbox` values of one consumer applies them in
//! one group, as it always did.

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use txoutbox_core::MessageId;
use txoutbox_core::consumer::{GroupEntry, GroupFuture, GroupKey, InboxGroup};

use super::Inbox;
use super::group::GroupTransaction;
use crate::error::OutboxError;

/// The open groups, by key.
static OPEN: LazyLock<Mutex<HashMap<GroupKey, GroupTransaction>>> = LazyLock::new(Mutex::default);

fn open() -> MutexGuard<'static, HashMap<GroupKey, GroupTransaction>> {
    OPEN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes the group `key` out of the registry, if it is there.
fn take(key: GroupKey) -> Option<GroupTransaction> {
    open().remove(&key)
}

/// A group transaction of an inbox, as a subscriber holds it (see
/// [`ConsumerInbox::begin_group`](txoutbox_core::consumer::ConsumerInbox::begin_group)):
/// its key in the registry. Dropping it without a commit rolls the
/// transaction back.
pub(super) struct OpenGroup {
    key: GroupKey,
}

impl OpenGroup {
    /// Begins a group transaction of `inbox` and keeps it open here.
    pub(super) async fn begin(inbox: Inbox) -> Result<Self, OutboxError> {
        let group = GroupTransaction::begin(inbox).await?;
        let key = GroupKey::unique();
        open().insert(key, group);
        Ok(Self { key })
    }
}

impl InboxGroup for OpenGroup {
    fn key(&self) -> GroupKey {
        self.key
    }

    fn record(&mut self, entries: Vec<GroupEntry>) -> GroupFuture<'_, HashSet<MessageId>> {
        Box::pin(async move {
            let mut group = Lent::of(self)?;
            Ok(group.record(entries).await?)
        })
    }

    fn commit(self: Box<Self>) -> GroupFuture<'static, ()> {
        let group = take(self.key);
        Box::pin(async move {
            let group = group.ok_or(OutboxError::GroupTransactionLost)?;
            Ok(group.commit().await?)
        })
    }
}

/// A group dropped before its commit (a handler failed, the subscriber
/// stopped) is rolled back.
impl Drop for OpenGroup {
    fn drop(&mut self) {
        let group = take(self.key);
        drop(group); // outside the registry's lock
    }
}

/// A group's transaction, lent out of the registry to an inbox handler (or
/// to the group itself) while `'g` borrows the group; back in the registry
/// when dropped, even if the handler's future is dropped half way (it then
/// comes back without its transaction, and the group fails with
/// [`OutboxError::GroupTransactionLost`]).
pub(super) struct Lent<'g> {
    key: GroupKey,
    group: Option<GroupTransaction>,
    borrow: PhantomData<&'g mut ()>,
}

impl<'g> Lent<'g> {
    /// The transaction of `group`, an inbox's group; an error when no
    /// inbox of this process holds it open (a group another kind of inbox
    /// began: nothing is applied).
    pub(super) fn of(group: &'g mut dyn InboxGroup) -> Result<Self, OutboxError> {
        let key = group.key();
        let group = take(key).ok_or(OutboxError::GroupTransactionLost)?;
        Ok(Self {
            key,
            group: Some(group),
            borrow: PhantomData,
        })
    }
}

impl Deref for Lent<'_> {
    type Target = GroupTransaction;

    fn deref(&self) -> &GroupTransaction {
        self.group
            .as_ref()
            .unwrap_or_else(|| unreachable!("a lent group is given back only when dropped"))
    }
}

impl DerefMut for Lent<'_> {
    fn deref_mut(&mut self) -> &mut GroupTransaction {
        self.group
            .as_mut()
            .unwrap_or_else(|| unreachable!("a lent group is given back only when dropped"))
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            open().insert(self.key, group);
        }
    }
}
