//! How a processor learns that there is work: wake-ups, coalesced.
//!
//! Sources push into a [`WakeHandle`]; the processor takes everything that
//! accumulated in one go, so a thousand commits between two claims cost one
//! claim. Memory is bounded: past [`FAST_PATH_CAPACITY`] ids the fast path
//! degrades to "claim", which finds the same messages with one query.
//!
//! This module and its child `handover` (the lease-at-commit protocol)
//! import each other, on purpose, within this one folder: the handle makes
//! and keeps the lease offers (to close them at shutdown) that `handover`
//! defines, and a hand-over wakes the processor through this handle.
//! Splitting the pair would only move one of them behind a trait with a
//! single implementation.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

pub(crate) mod handover;

use self::handover::{Handover, LeaseOffer, OfferShared};
use super::sync::locked;
use crate::id::{LeaseToken, MessageId};

/// Most just-committed message ids a processor holds for its fast path.
pub const FAST_PATH_CAPACITY: usize = 65_536;

/// Something that wakes a processor: commits in this process or a database
/// notification from another process (with the ids of the messages when
/// known, so they are leased by primary key and need no query to be found),
/// a reconnect.
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
    /// Commits leased to the processor at commit (see [`LeaseOffer`]).
    handed: Mutex<HandedQueue>,
    /// Commits leased at commit whose outcome is unknown: release them.
    uncertain: Mutex<Vec<Uncertain>>,
    /// Messages handed over and not yet published or released.
    handed_count: AtomicUsize,
    /// The processor's lease while it runs: offers can be made.
    lease: Mutex<Option<Duration>>,
    offers: Mutex<Vec<Arc<OfferShared>>>,
}

#[derive(Debug, Default)]
struct HandedQueue {
    handovers: Vec<Handover>,
    /// The processor took its last hand-over: refuse more.
    refusing: bool,
}

/// Messages a commit may have written leased under `token`, with no
/// hand-over: the commit failed or was cancelled, perhaps after the server
/// committed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Uncertain {
    pub(crate) token: LeaseToken,
    pub(crate) ids: Vec<MessageId>,
}

/// What accumulated since the processor last looked.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Wakeups {
    /// Messages committed in this process, to lease by id.
    pub(crate) committed: Vec<MessageId>,
    /// Run an ordinary claim as well.
    pub(crate) claim: bool,
    /// Commits leased to the processor at commit: publish, no claim.
    pub(crate) handed: Vec<Handover>,
    /// Commits leased at commit with an unknown outcome: release.
    pub(crate) uncertain: Vec<Uncertain>,
}

impl WakeHandle {
    /// These messages were just committed (here or in another process):
    /// lease them by id and publish them.
    pub fn committed(&self, ids: impl IntoIterator<Item = MessageId>) {
        {
            let mut committed = locked(&self.state.committed);
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

    /// An offer to take messages leased at commit (see [`LeaseOffer`]), or
    /// `None` while the processor is not running. For a wake source in the
    /// processor's own process that hears about commits before they are
    /// sent. Part of the lease-at-commit protocol for store implementations
    /// (see `txoutbox_core::processor::__handover`), outside semver.
    #[doc(hidden)]
    pub fn offer_leases(&self) -> Option<LeaseOffer> {
        let lease = (*locked(&self.state.lease))?;
        let (offer, shared) = LeaseOffer::new(lease, self.clone());
        locked(&self.state.offers).push(shared);
        Some(offer)
    }

    /// The processor runs with `lease`: offers can be made.
    pub(crate) fn serve(&self, lease: Duration) {
        locked(&self.state.handed).refusing = false;
        *locked(&self.state.lease) = Some(lease);
    }

    /// Closes every offer and waits for the writers inside them (bound the
    /// wait with a timeout: a writer may wait for a connection or a row
    /// lock). Writers that are still inside when the processor
    /// [stops taking](Self::take_last) get their hand-over refused.
    pub(crate) async fn close_offers(&self) {
        *locked(&self.state.lease) = None;
        let offers = std::mem::take(&mut *locked(&self.state.offers));
        for offer in offers {
            offer.close().await;
        }
    }

    /// Pauses every offer (the broker is away): no writer enters until
    /// [`resume_offers`](Self::resume_offers). Returns at once.
    pub(crate) fn pause_offers(&self) {
        for offer in locked(&self.state.offers).iter() {
            offer.pause();
        }
    }

    /// Lets writers lease at commit again.
    pub(crate) fn resume_offers(&self) {
        for offer in locked(&self.state.offers).iter() {
            offer.resume();
        }
    }

    /// Closes every offer without waiting (the processor is going away).
    pub(crate) fn close_offers_now(&self) {
        locked(&self.state.handed).refusing = true;
        *locked(&self.state.lease) = None;
        for offer in std::mem::take(&mut *locked(&self.state.offers)) {
            offer.close_now();
        }
    }

    /// Queues `handover` for the processor, or gives it back when the
    /// processor no longer takes any.
    pub(crate) fn hand_over(&self, handover: Handover) -> Result<(), Handover> {
        {
            let mut handed = locked(&self.state.handed);
            if handed.refusing {
                return Err(handover);
            }
            self.state
                .handed_count
                .fetch_add(handover.messages.len(), Ordering::AcqRel);
            handed.handovers.push(handover);
        }
        self.state.notify.notify_one();
        Ok(())
    }

    /// A commit leased under `token` ended without a hand-over: release
    /// `ids` (those that were committed become claimable at once).
    pub(crate) fn uncertain(&self, token: LeaseToken, ids: Vec<MessageId>) {
        locked(&self.state.uncertain).push(Uncertain { token, ids });
        self.state.notify.notify_one();
    }

    /// Messages handed over and not yet published or released.
    pub(crate) fn handed_over(&self) -> usize {
        self.state.handed_count.load(Ordering::Acquire)
    }

    /// `count` handed-over messages went into a batch or were released.
    pub(crate) fn handed_settled(&self, count: usize) {
        let _ = self
            .state
            .handed_count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(count))
            });
    }

    /// Everything that accumulated, leaving nothing behind.
    pub(crate) fn take(&self) -> Wakeups {
        let committed = std::mem::take(&mut *locked(&self.state.committed));
        let claim = self.state.claim.swap(false, Ordering::AcqRel);
        let handed = std::mem::take(&mut locked(&self.state.handed).handovers);
        let uncertain = std::mem::take(&mut *locked(&self.state.uncertain));
        Wakeups {
            committed,
            claim,
            handed,
            uncertain,
        }
    }

    /// The last [`take`](Self::take) of a stopping processor: later
    /// hand-overs are refused (their writers release them).
    pub(crate) fn take_last(&self) -> Wakeups {
        locked(&self.state.handed).refusing = true;
        self.take()
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
                ..Wakeups::default()
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
