//! [`Shared`]: what every handle of one outbox shares (the database, the
//! settings, the wake-ups) and the steps they take after a commit.
//! [`Outbox`](crate::Outbox) is the front door; the units of work,
//! repositories and joined transactions it hands out hold this, not it.

use std::sync::Arc;

use sea_orm::DatabaseConnection;
use txoutbox_core::processor::__handover::LeasedCommit;
use txoutbox_core::{MessageContext, MessageId, OutboxMessage, OutboxStore as _, PendingMessage};

use crate::config::OutboxConfig;
use crate::store::SeaOrmOutboxStore;
use crate::wake::Wakers;

/// The state behind an [`Outbox`](crate::Outbox) and what it hands out.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) db: DatabaseConnection,
    pub(crate) config: OutboxConfig,
    pub(crate) wakers: Wakers,
}

impl Shared {
    /// The shared state of an outbox on `db`.
    pub(crate) fn new(db: DatabaseConnection, config: OutboxConfig) -> Arc<Self> {
        let wakers = Wakers::new(&db, config.notify_channel().map(str::to_owned));
        Arc::new(Self { db, config, wakers })
    }

    /// The store on this database and table.
    pub(crate) fn store(&self) -> SeaOrmOutboxStore {
        SeaOrmOutboxStore::new(self.db.clone(), self.config.clone())
    }

    /// `pending` as a message of no aggregate (see
    /// [`OutboxMessage::standalone`]).
    pub(crate) fn standalone(
        &self,
        pending: PendingMessage,
        context: &MessageContext,
    ) -> OutboxMessage {
        OutboxMessage::standalone(pending, context, self.config.subject_prefix())
    }

    /// After a commit: wakes the processors and hands what was written
    /// leased to this process's processor; if it stopped meanwhile, releases
    /// those messages so any processor claims them at once.
    pub(crate) async fn committed(
        &self,
        messages: Vec<OutboxMessage>,
        leased: Option<(LeasedCommit, Vec<MessageId>)>,
    ) {
        let Some(refused) = self.wakers.committed(messages, leased) else {
            return;
        };
        if let Err(err) = self.store().release(refused.token, &refused.ids).await {
            tracing::warn!(
                error = %txoutbox_core::ErrorChain(&err), messages = refused.ids.len(),
                "outbox release after the processor stopped failed; the messages wait for their lease"
            );
        }
    }

    /// After the application committed messages on its own transaction:
    /// hands them to this process's processor and wakes the others.
    pub(crate) fn announce(&self, messages: Vec<OutboxMessage>) {
        // Nothing was written leased, so nothing can be refused.
        let _ = self.wakers.committed(messages, None);
    }

    /// Enters the lease offer of this process's processor for one commit
    /// (see [`LeasedCommit`]), if one is running and has room.
    pub(crate) fn enter_lease(&self) -> Option<LeasedCommit> {
        self.wakers.enter_lease()
    }
}
