//! Held aggregates (with [`keep_order`](crate::subscriber::SubscriberBuilder::keep_order)):
//! a message of an aggregate that goes to the dead letters because it could
//! not be applied holds its aggregate; later messages of the aggregate are
//! parked behind it in the consumer's store (the inbox) and acknowledged,
//! so a held aggregate takes nothing of JetStream's window and other
//! aggregates go on. An operator releases the aggregate through the store
//! (`txoutbox_sea_orm::Inbox::release`); within `release::RELEASE_POLL` the
//! subscriber applies what is parked, in order, through the same handlers.
//!
//! Which aggregates are held is read from the store when the subscriber
//! starts and every `release::RELEASE_POLL` after, so a hold survives restarts and
//! is seen by every process of the consumer within that period. Changes to
//! the held set (a hold, a park, a refresh, a replay) happen one at a time
//! under one lock, so no message of a held aggregate is applied between
//! its hold being recorded and the set knowing it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use txoutbox_core::backoff::Doubling;
use txoutbox_core::consumer::{BoxError, HeldMessages, Hold, ParkedMessage};

use crate::subscriber::health::HELD_AGGREGATES;
use crate::subscriber::lanes::{LaneKey, lane_key};

/// Attempts at recording a hold before its message waits for the store
/// (unsettled: it is never dead-lettered without its hold).
const HOLD_ATTEMPTS: u32 = 3;

/// The held aggregates of one subscriber, and its store.
pub(crate) struct Holds {
    store: Arc<dyn HeldMessages>,
    held: Mutex<HashSet<LaneKey>>,
    changes: tokio::sync::Mutex<()>,
}

impl Holds {
    /// Holds kept in `store`; none known until [`refresh`](Self::refresh).
    pub(crate) fn new(store: Arc<dyn HeldMessages>) -> Self {
        Self {
            store,
            held: Mutex::default(),
            changes: tokio::sync::Mutex::new(()),
        }
    }

    /// The store, for [`release`](super::release).
    pub(crate) fn store(&self) -> &dyn HeldMessages {
        &*self.store
    }

    /// Serializes a change of the held set with the others (see the module
    /// docs).
    pub(crate) async fn changing(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.changes.lock().await
    }

    /// `key`'s aggregate flows again (its release was applied).
    pub(crate) fn forget(&self, key: &LaneKey) {
        self.held().remove(key);
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashSet<LaneKey>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many aggregates are held, as of the last refresh (for the
    /// subscriber's health).
    pub(crate) fn count(&self) -> usize {
        self.held().len()
    }

    /// Whether `key`'s aggregate is held (a cheap check on every message).
    pub(crate) fn is_held(&self, key: &LaneKey) -> bool {
        let held = self.held();
        !held.is_empty() && held.contains(key)
    }

    /// Reads the holds from the store; returns them.
    pub(crate) async fn refresh(&self, consumer: &str) -> Result<Vec<Hold>, BoxError> {
        let _change = self.changes.lock().await;
        let holds = self.store.holds().await?;
        let keys: HashSet<LaneKey> = holds
            .iter()
            .map(|hold| lane_key(&hold.aggregate_type, &hold.aggregate_id))
            .collect();
        ::metrics::gauge!(HELD_AGGREGATES, "consumer" => consumer.to_owned())
            .set(keys.len() as f64);
        *self.held() = keys;
        Ok(holds)
    }

    /// Holds `message`'s aggregate behind it: it could not be applied, for
    /// `reason`. Tried a few times, quickly; should the store stay
    /// unreachable, its error: the message is then not dead-lettered (its
    /// aggregate's later messages would pass it) but waits, unsettled, for
    /// the store to answer (see `holding::hold_if_dead`).
    pub(crate) async fn hold_behind(
        &self,
        consumer: &str,
        message: ParkedMessage,
        key: &LaneKey,
        reason: &str,
    ) -> Result<(), BoxError> {
        let (aggregate_type, aggregate_id) =
            (message.aggregate_type.clone(), message.aggregate_id.clone());
        let mut delay = Doubling::new(Duration::from_millis(100), Duration::from_millis(400));
        let mut attempt = 1;
        loop {
            // The park and the held set change together under the lock (a
            // refresh in between would forget the hold); the pauses between
            // attempts hold no lock, so other aggregates' parks go on.
            let change = self.changes.lock().await;
            let parked = self.store.park(message.clone()).await;
            if parked.is_ok() {
                self.held().insert(Arc::clone(key));
            }
            drop(change);
            match parked {
                Ok(()) => {
                    tracing::error!(
                        consumer, %aggregate_type, %aggregate_id,
                        message_id = %message.message_id, %reason,
                        "a message could not be applied: its aggregate is held behind it \
                         (later messages are parked) until an operator releases it"
                    );
                    return Ok(());
                }
                Err(err) if attempt == HOLD_ATTEMPTS => return Err(err),
                Err(err) => {
                    let pause = delay.next_pause();
                    tracing::warn!(consumer, error = %txoutbox_core::ErrorChain(&*err), retry_in = ?pause, "recording a hold");
                    tokio::time::sleep(pause).await;
                    attempt += 1;
                }
            }
        }
    }

    /// Parks `message` if its aggregate is held: `Ok(true)` when it was
    /// parked (acknowledge it), `Ok(false)` when the aggregate is not held
    /// (any more: a release was applied meanwhile), and the store's error
    /// when parking failed (deliver it again later).
    pub(crate) async fn park_if_held(
        &self,
        message: ParkedMessage,
        key: &LaneKey,
    ) -> Result<bool, BoxError> {
        let _change = self.changes.lock().await;
        if !self.is_held(key) {
            return Ok(false);
        }
        self.store.park(message).await?;
        Ok(true)
    }
}
