//! Releasing many held aggregates at once, after an incident: those a
//! [`HoldFilter`] keeps ([`Inbox::release_all`]) or those an operator
//! selected ([`Inbox::release_many`]), in bounded batches, one statement
//! each, oldest hold first.

use txoutbox_core::MessageId;
use txoutbox_core::consumer::{Hold, Release};

use super::{HoldFilter, Inbox, held_bulk_sql, held_sql};
use crate::error::OutboxError;

/// Holds [`Inbox::release_many`] releases per statement.
const IDS_PER_STATEMENT: usize = 500;

impl Inbox {
    /// The first `limit` of this consumer's held aggregates not released
    /// yet that `filter` keeps, oldest hold first: what
    /// [`release_all`](Self::release_all) would release first.
    pub async fn holds_matching(
        &self,
        filter: &HoldFilter,
        limit: u32,
    ) -> Result<Vec<Hold>, OutboxError> {
        Ok(held_sql::holds(
            self.outbox.db(),
            &self.held_table(),
            &self.consumer,
            Some((filter, limit)),
        )
        .await?)
    }

    /// How many of this consumer's held aggregates not released yet
    /// `filter` keeps: what [`release_all`](Self::release_all) would
    /// release now.
    pub async fn count_holds(&self, filter: &HoldFilter) -> Result<u64, OutboxError> {
        Ok(
            held_bulk_sql::count(self.outbox.db(), &self.held_table(), &self.consumer, filter)
                .await?,
        )
    }

    /// Releases `how` every held aggregate of this consumer that `filter`
    /// keeps and that is not released yet, as [`release`](Self::release)
    /// releases one: oldest hold first, `batch_size` holds per statement
    /// (so no statement runs long or locks many rows), until none is left.
    /// Only holds already held when it starts are released: an aggregate
    /// held again meanwhile (a released message that failed again) waits
    /// for the operator. Returns how many it released; the subscriber
    /// applies what is parked behind them, in order, within a second.
    ///
    /// ```no_run
    /// # async fn run(inbox: txoutbox_sea_orm::Inbox) -> Result<(), txoutbox_sea_orm::OutboxError> {
    /// use txoutbox_core::consumer::Release;
    /// use txoutbox_sea_orm::inbox::HoldFilter;
    /// // The payment service is back: retry every order it held.
    /// let filter = HoldFilter::all().aggregate_type("order").reason_contains("payment service");
    /// let released = inbox.release_all(&filter, Release::Retry, 100).await?;
    /// tracing::info!(released, "held orders released");
    /// # Ok(()) }
    /// ```
    pub async fn release_all(
        &self,
        filter: &HoldFilter,
        how: Release,
        batch_size: u32,
    ) -> Result<u64, OutboxError> {
        self.release_all_reporting(filter, how, batch_size, |_| {})
            .await
    }

    /// [`release_all`](Self::release_all), calling `progress` with the
    /// running total of released holds after each batch (for a progress
    /// bar).
    pub async fn release_all_reporting(
        &self,
        filter: &HoldFilter,
        how: Release,
        batch_size: u32,
        mut progress: impl FnMut(u64) + Send,
    ) -> Result<u64, OutboxError> {
        let db = self.outbox.db();
        let (table, batch) = (self.held_table(), batch_size.max(1));
        let cutoff = held_bulk_sql::now(db).await?;
        let mut released = 0;
        loop {
            let done = held_bulk_sql::release_batch(
                db,
                &table,
                &self.consumer,
                filter,
                cutoff,
                how,
                batch,
            )
            .await?;
            released += done;
            progress(released);
            if done < u64::from(batch) {
                tracing::info!(consumer = %self.consumer, released, release = how.as_str(), filter = %filter, "held aggregates released");
                return Ok(released);
            }
        }
    }

    /// Releases `how` those of the holds `ids` (each a
    /// [`Hold::message_id`], the message an aggregate is held behind) that
    /// are held and not released yet, in the order given, a few hundred
    /// per statement. Returns how many it released: an id whose aggregate
    /// was released meanwhile, or is held behind another message now, is
    /// left alone.
    ///
    /// ```no_run
    /// # async fn run(inbox: txoutbox_sea_orm::Inbox) -> Result<(), txoutbox_sea_orm::OutboxError> {
    /// use txoutbox_core::consumer::Release;
    /// let chosen: Vec<_> = inbox
    ///     .holds()
    ///     .await?
    ///     .into_iter()
    ///     .filter(|hold| hold.event_name == "order.paid")
    ///     .map(|hold| hold.message_id)
    ///     .collect();
    /// inbox.release_many(&chosen, Release::Skip).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release_many(&self, ids: &[MessageId], how: Release) -> Result<u64, OutboxError> {
        let table = self.held_table();
        let mut released = 0;
        for chunk in ids.chunks(IDS_PER_STATEMENT) {
            released +=
                held_bulk_sql::release_ids(self.outbox.db(), &table, &self.consumer, chunk, how)
                    .await?;
        }
        tracing::info!(consumer = %self.consumer, released, named = ids.len(), release = how.as_str(), "held aggregates released");
        Ok(released)
    }
}
