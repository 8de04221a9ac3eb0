//! Held aggregates: what an [`Inbox`] keeps for a subscriber that keeps
//! order (`txoutbox_nats::SubscriberBuilder::keep_order`) when it could not
//! apply a message, and the operator's way out ([`Inbox::release`], and
//! for many at once [`Inbox::release_all`] and [`Inbox::release_many`]).

use sea_orm::TransactionTrait;
use txoutbox_core::consumer::{HeldFuture, HeldMessages, Hold, ParkedMessage, Release, Unpark};

use super::{Inbox, is_unique_violation, sql};
use crate::error::OutboxError;
use crate::schema::held_table;

use super::held_sql;

impl Inbox {
    pub(super) fn held_table(&self) -> String {
        held_table(self.outbox.config().inbox_table())
    }

    /// This consumer's held aggregates, oldest first: each is held behind a
    /// message its subscriber could not apply (the [`Hold::reason`]), with
    /// [`Hold::waiting`] later messages parked behind it. Nothing of a held
    /// aggregate is applied until it is [released](Self::release).
    ///
    /// ```no_run
    /// # async fn run(inbox: txoutbox_sea_orm::Inbox) -> Result<(), txoutbox_sea_orm::OutboxError> {
    /// for hold in inbox.holds().await? {
    ///     println!(
    ///         "{}/{} held behind {} ({}): {} waiting",
    ///         hold.aggregate_type, hold.aggregate_id, hold.event_name, hold.reason, hold.waiting
    ///     );
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn holds(&self) -> Result<Vec<Hold>, OutboxError> {
        Ok(held_sql::holds(self.outbox.db(), &self.held_table(), &self.consumer, None).await?)
    }

    /// Releases a held aggregate: its subscriber (within a second) applies
    /// the message it is held behind again ([`Release::Retry`], once its
    /// cause is fixed) or leaves it unapplied for good ([`Release::Skip`]:
    /// recorded as processed), then the messages parked after it, in order,
    /// and the aggregate flows again. Should one fail, the aggregate is held
    /// behind that one, with its new reason. Returns whether the aggregate
    /// was held.
    ///
    /// ```no_run
    /// # async fn run(inbox: txoutbox_sea_orm::Inbox) -> Result<(), txoutbox_sea_orm::OutboxError> {
    /// use txoutbox_core::consumer::Release;
    /// // The bug that rejected order 42's payment is fixed and deployed:
    /// inbox.release("order", "42", Release::Retry).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        how: Release,
    ) -> Result<bool, OutboxError> {
        let released = held_sql::release(
            self.outbox.db(),
            &self.held_table(),
            &self.consumer,
            aggregate_type,
            aggregate_id,
            how,
        )
        .await?;
        if released {
            tracing::info!(consumer = %self.consumer, aggregate_type, aggregate_id, release = how.as_str(), "held aggregate released");
        }
        Ok(released)
    }

    async fn park(&self, message: ParkedMessage) -> Result<(), OutboxError> {
        let event_name = message.event_name().to_owned();
        let parked = held_sql::park(
            self.outbox.db(),
            &self.held_table(),
            &self.consumer,
            &message,
            &event_name,
        )
        .await;
        match parked {
            Err(err) if !is_unique_violation(&err) => Err(err.into()),
            _ => Ok(()),
        }
    }

    async fn unpark(&self, message: ParkedMessage, outcome: Unpark) -> Result<(), OutboxError> {
        let (table, id) = (self.held_table(), message.message_id);
        match outcome {
            Unpark::Applied => {
                held_sql::delete(self.outbox.db(), &table, &self.consumer, id).await?;
            }
            Unpark::Skipped => {
                let txn = self.outbox.db().begin().await?;
                let event_name = message.event_name();
                match sql::insert(&txn, self.table(), &self.consumer, id, event_name, None).await {
                    Err(err) if !is_unique_violation(&err) => return Err(err.into()),
                    _ => {}
                }
                held_sql::delete(&txn, &table, &self.consumer, id).await?;
                txn.commit().await?;
                tracing::warn!(consumer = %self.consumer, message_id = %id, aggregate_type = %message.aggregate_type, aggregate_id = %message.aggregate_id, "held message skipped by the operator: recorded as processed, never applied");
            }
            Unpark::HeldAgain { reason } => {
                held_sql::hold_behind(self.outbox.db(), &table, &self.consumer, id, &reason)
                    .await?;
            }
        }
        Ok(())
    }
}

/// Where a subscriber that keeps order parks held aggregates' messages: the
/// `<inbox>_held` table, in the same database as the effects.
impl HeldMessages for Inbox {
    fn park(&self, message: ParkedMessage) -> HeldFuture<()> {
        let inbox = self.clone();
        Box::pin(async move { Ok(Inbox::park(&inbox, message).await?) })
    }

    fn holds(&self) -> HeldFuture<Vec<Hold>> {
        let inbox = self.clone();
        Box::pin(async move { Ok(Inbox::holds(&inbox).await?) })
    }

    fn parked(
        &self,
        aggregate_type: String,
        aggregate_id: String,
    ) -> HeldFuture<Vec<ParkedMessage>> {
        let inbox = self.clone();
        Box::pin(async move {
            Ok(held_sql::parked(
                inbox.outbox.db(),
                &inbox.held_table(),
                &inbox.consumer,
                &aggregate_type,
                &aggregate_id,
            )
            .await?)
        })
    }

    fn unpark(&self, message: ParkedMessage, outcome: Unpark) -> HeldFuture<()> {
        let inbox = self.clone();
        Box::pin(async move { Ok(Inbox::unpark(&inbox, message, outcome).await?) })
    }
}
