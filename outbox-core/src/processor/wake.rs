//! How a processor learns that there is work: wake-ups, coalesced.
//!
//! Sources push into a [`WakeHandle`]; the processor takes everything that
//! accumulated in one go, so a thousand commits between two claims cost one
//! claim. Memory is bounded: past [`FAST_PATH_CAPACITY`] ids the fast path
//! degrades to "claim", which finds the same messages with one query.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use crate::id::MessageId;

/// Most just-committed message ids a processor holds for its fast path.
pub const FAST_PATH_CAPACITY: usize = 65_536;

/// Something that wakes a processor: commits in this process (with the ids
/// of the messages, so they are leased by primary key and need no query to
/// be found), a database notification from another process, a reconnect.
///
/// `outbox-sea-orm` implements it for its commit listener and for
/// PostgreSQL `LISTEN`.
pub trait WakeSource: Send + 'static {
    /// Runs until the source ends, pushing wake-ups into `wake`. The
    /// processor spawns it and aborts it when the processor stops.
    fn run(self, wake: WakeHandle) -> impl Future<Output = ()> + Send;
}

/// The sending side of a processor's wake-ups. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct WakeHandle {
    state: Arc<WakeState>,
}

#[derive(Debug, Default)]
struct WakeState {
    committed: Mutex<Vec<MessageId>>,
    claim: AtomicBool,
    notify: Notify,
}

/// What accumulated since the processor last looked.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Wakeups {
    /// Messages committed in this process, to lease by id.
    pub(crate) committed: Vec<MessageId>,
    /// Run an ordinary claim as well.
    pub(crate) claim: bool,
}

impl WakeHandle {
    /// These messages were just committed: lease and publish them.
    pub fn committed(&self, ids: impl IntoIterator<Item = MessageId>) {
        {
            let mut committed = self
                .state
                .committed
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for id in ids {
                if committed.len() >= FAST_PATH_CAPACITY {
                    self.state.claim.store(true, Ordering::Release);
                    break;
                }
                committed.push(id);
            }
        }
        self.state.notify.notify_one();
    }

    /// Messages may be waiting (a notification, a missed commit, a
    /// reconnect): run a claim.
    pub fn claim(&self) {
        self.state.claim.store(true, Ordering::Release);
        self.state.notify.notify_one();
    }

    /// Everything that accumulated, leaving nothing behind.
    pub(crate) fn take(&self) -> Wakeups {
        let committed = std::mem::take(
            &mut *self
                .state
                .committed
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let claim = self.state.claim.swap(false, Ordering::AcqRel);
        Wakeups { committed, claim }
    }

    /// Resolves at the next wake-up (at once if one came since the last
    /// `take`, as `Notify` keeps a permit).
    pub(crate) async fn woken(&self) {
        self.state.notify.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_and_overflows_into_a_claim() {
        let wake = WakeHandle::default();
        let ids: Vec<MessageId> = (0..3).map(|_| MessageId::new()).collect();
        wake.committed(ids.clone());
        wake.committed([]);
        assert_eq!(
            wake.take(),
            Wakeups {
                committed: ids,
                claim: false
            }
        );
        assert_eq!(wake.take(), Wakeups::default());

        wake.committed((0..FAST_PATH_CAPACITY + 5).map(|_| MessageId::new()));
        let taken = wake.take();
        assert_eq!(taken.committed.len(), FAST_PATH_CAPACITY);
        assert!(taken.claim, "overflow must fall back to a claim");
    }

    #[tokio::test]
    async fn a_wakeup_before_waiting_is_not_lost() {
        let wake = WakeHandle::default();
        wake.claim();
        tokio::time::timeout(std::time::Duration::from_secs(1), wake.woken())
            .await
            .expect("the permit was kept");
    }
}
