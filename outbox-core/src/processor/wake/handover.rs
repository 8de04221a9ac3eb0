//! Messages committed already leased to a processor: the fast path without
//! a claim.
//!
//! A wake source in the processor's own process (`outbox-sea-orm`'s commit
//! listener) takes a [`LeaseOffer`] from the processor's [`WakeHandle`].
//! A writer that [enters](LeaseOffer::enter) the offer writes its outbox
//! rows already leased under the offer's token (when no earlier message of
//! their aggregate is unpublished: order comes first) and, after the commit,
//! [hands them over](LeasedCommit::hand_over). The processor publishes them
//! without a claim statement: per batch one statement and one row version
//! per message fewer.
//!
//! At shutdown the processor closes its offers, waits for the writers inside
//! them, and releases what it was handed but did not publish. If it dies
//! instead, those rows' lease runs out like any other and they are claimed
//! again.
//!
//! This module and its parent `wake` import each other, on purpose, within
//! one folder: an offer is taken from a [`WakeHandle`] (which keeps the
//! offers it made, to close them at shutdown), and a hand-over wakes the
//! processor through that same handle.
//! Splitting the pair would only move one of them behind a trait with a
//! single implementation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedRwLockReadGuard, RwLock};
use tokio::time::Instant;

use super::WakeHandle;
use crate::id::{LeaseToken, MessageId};
use crate::message::OutboxMessage;

/// Most messages handed over and not yet published or released; past it,
/// writers stop leasing at commit (their messages take the claim path), so
/// memory stays bounded when the broker is away.
pub const HANDOVER_CAPACITY: usize = 8_192;

/// A processor's standing offer to take messages leased at commit, from
/// [`WakeHandle::offer_leases`].
///
/// A writer in the processor's process that [enters](LeaseOffer::enter) the
/// offer writes its outbox rows already leased under the offer's token
/// (where no earlier message of their aggregate is unpublished: order comes
/// first) and, after the commit, [hands them over](LeasedCommit::hand_over).
/// The processor publishes them without a claim statement. At shutdown it
/// closes its offers, waits for the writers inside them, and releases what
/// it was handed but did not publish; if it dies instead, the rows' lease
/// runs out like any other and they are claimed again.
#[derive(Debug, Clone)]
pub struct LeaseOffer {
    token: LeaseToken,
    lease: Duration,
    shared: Arc<OfferShared>,
}

#[derive(Debug)]
pub(crate) struct OfferShared {
    closed: AtomicBool,
    /// The broker is away: no leasing at commit until it is back.
    paused: AtomicBool,
    /// Held (shared) by every writer inside the offer; taken exclusively to
    /// wait for them at shutdown.
    inside: Arc<RwLock<()>>,
    wake: WakeHandle,
}

impl OfferShared {
    /// No writer enters any more; resolves once those inside are out.
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        drop(self.inside.write().await);
    }

    /// No writer enters until [`resume`](Self::resume). Those inside are not
    /// waited for: they hand over as usual, and what they hand over is
    /// released at the processor's next look (or published, if the broker
    /// is back by then).
    pub(crate) fn pause(&self) {
        self.paused.store(true, Ordering::Release);
    }

    pub(crate) fn resume(&self) {
        self.paused.store(false, Ordering::Release);
    }

    fn shut(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.paused.load(Ordering::Acquire)
    }

    /// No writer enters any more (for a processor that is going away
    /// without waiting).
    pub(crate) fn close_now(&self) {
        self.closed.store(true, Ordering::Release);
    }
}

impl LeaseOffer {
    pub(crate) fn new(lease: Duration, wake: WakeHandle) -> (Self, Arc<OfferShared>) {
        let shared = Arc::new(OfferShared {
            closed: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            inside: Arc::new(RwLock::new(())),
            wake,
        });
        let offer = Self {
            token: LeaseToken::new(),
            lease,
            shared: Arc::clone(&shared),
        };
        (offer, shared)
    }

    /// Enters the offer for one commit, or `None` when the processor is
    /// stopping, waits for the broker, or already holds
    /// [`HANDOVER_CAPACITY`] handed-over messages.
    /// Hold the returned value until the commit is over, then call
    /// [`hand_over`](LeasedCommit::hand_over) (or drop it if the commit
    /// failed).
    pub fn enter(&self) -> Option<LeasedCommit> {
        let shared = &self.shared;
        if shared.shut() || shared.wake.handed_over() >= HANDOVER_CAPACITY {
            return None;
        }
        let inside = Arc::clone(&shared.inside).try_read_owned().ok()?;
        // Shut between the check and the entry: the closer may not wait for
        // this writer.
        if shared.shut() {
            return None;
        }
        Some(LeasedCommit {
            token: self.token,
            lease: self.lease,
            since: Instant::now(),
            shared: Arc::clone(shared),
            may_write: Vec::new(),
            _inside: inside,
        })
    }

    /// The token rows are leased under.
    pub fn token(&self) -> LeaseToken {
        self.token
    }

    /// How long a lease taken at commit lasts.
    pub fn lease(&self) -> Duration {
        self.lease
    }
}

/// One commit inside a [`LeaseOffer`]: write the rows leased under
/// [`token`](LeasedCommit::token) for [`lease`](LeasedCommit::lease), by the
/// database clock, then hand over those committed so.
///
/// Say which messages the commit [may write](LeasedCommit::may_write)
/// before sending it. If the commit's outcome is unknown (it failed, the
/// connection broke after the server committed, or its future was
/// cancelled) drop the value instead of handing over: the processor then
/// releases those messages, so any that were committed are claimed at once
/// instead of waiting for the lease. (A statement still running on the
/// server when the release arrives commits its rows leased; they wait for
/// the lease, at most [`lease`](LeasedCommit::lease).)
#[derive(Debug)]
pub struct LeasedCommit {
    token: LeaseToken,
    lease: Duration,
    /// Taken before the commit was sent: the lease cannot have started
    /// earlier.
    since: Instant,
    shared: Arc<OfferShared>,
    /// Released by the processor if this is dropped without a hand-over.
    may_write: Vec<MessageId>,
    _inside: OwnedRwLockReadGuard<()>,
}

/// Messages committed leased at commit that the processor no longer takes
/// (it stopped, or gave up waiting for this writer at shutdown): the writer
/// releases them with [`OutboxStore::release`](crate::OutboxStore::release)
/// so they are claimed at once rather than after the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoverRefused {
    /// The token the messages are leased under.
    pub token: LeaseToken,
    /// The messages.
    pub ids: Vec<MessageId>,
}

impl LeasedCommit {
    /// The token to write as the rows' lease.
    pub fn token(&self) -> LeaseToken {
        self.token
    }

    /// The lease to write (from the database's `now()`).
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Before the commit: the messages it may write leased. Released by the
    /// processor if this is dropped without a hand-over (see the type's
    /// docs).
    pub fn may_write(&mut self, ids: impl IntoIterator<Item = MessageId>) {
        self.may_write.extend(ids);
    }

    /// After the commit: these messages were committed leased under the
    /// token, in per-aggregate order. The processor publishes them without
    /// claiming them; if it no longer takes any (it stopped meanwhile), they
    /// come back for the caller to release.
    pub fn hand_over(mut self, messages: Vec<OutboxMessage>) -> Result<(), HandoverRefused> {
        self.may_write.clear();
        if messages.is_empty() {
            return Ok(());
        }
        let handover = Handover {
            token: self.token,
            since: self.since,
            messages,
        };
        self.shared
            .wake
            .hand_over(handover)
            .map_err(|refused| HandoverRefused {
                token: refused.token,
                ids: refused.messages.iter().map(|m| m.id).collect(),
            })
    }
}

impl Drop for LeasedCommit {
    fn drop(&mut self) {
        if !self.may_write.is_empty() {
            let ids = std::mem::take(&mut self.may_write);
            tracing::debug!(
                token = %self.token, messages = ids.len(),
                "outbox commit leased at commit ended without a hand-over; the processor releases its messages"
            );
            self.shared.wake.uncertain(self.token, ids);
        }
    }
}

/// Messages of one commit, leased at commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Handover {
    pub(crate) token: LeaseToken,
    /// No later than the lease's start.
    pub(crate) since: Instant,
    pub(crate) messages: Vec<OutboxMessage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer() -> (LeaseOffer, WakeHandle) {
        let wake = WakeHandle::default();
        wake.serve(Duration::from_secs(30));
        (wake.offer_leases().expect("serving"), wake)
    }

    fn message() -> OutboxMessage {
        serde_json::from_str(
            r#"{"id":"0190f5a2-7b3c-7d4e-8f00-112233445566","event_name":"order.placed",
                "event_version":1,"subject":"events.order.placed","aggregate_type":"order",
                "aggregate_id":"7","sequence":1,"occurred_at":"2026-11-23T10:00:00Z",
                "correlation_id":"c","causation_id":null,"tenant":null,"traceparent":null,
                "headers":{},"payload":{"order_id":7}}"#,
        )
        .expect("a message")
    }

    #[test]
    fn no_offer_while_the_processor_does_not_run() {
        assert!(WakeHandle::default().offer_leases().is_none());
    }

    #[test]
    fn handed_over_messages_reach_the_processor_under_the_offer_token() {
        let (offer, wake) = offer();
        let commit = offer.enter().expect("open");
        assert_eq!(commit.token(), offer.token());
        commit.hand_over(vec![message(), message()]).expect("taken");
        assert_eq!(wake.handed_over(), 2);
        let handed = wake.take().handed;
        assert_eq!(handed.len(), 1);
        assert_eq!(handed[0].token, offer.token());
        assert_eq!(handed[0].messages.len(), 2);
        wake.handed_settled(2);
        assert_eq!(wake.handed_over(), 0);
    }

    #[test]
    fn a_full_processor_takes_no_more() {
        let (offer, wake) = offer();
        let full: Vec<OutboxMessage> = (0..HANDOVER_CAPACITY).map(|_| message()).collect();
        offer.enter().expect("open").hand_over(full).expect("taken");
        assert!(offer.enter().is_none(), "at capacity");
        wake.handed_settled(1);
        assert!(offer.enter().is_some(), "room again");
    }

    #[tokio::test]
    async fn no_leasing_while_the_broker_is_away() {
        let (offer, wake) = offer();
        let inside = offer.enter().expect("open");
        wake.pause_offers(); // returns at once, a writer inside or not
        assert!(offer.enter().is_none(), "paused");
        inside
            .hand_over(vec![message()])
            .expect("taken while paused");
        wake.resume_offers();
        assert!(offer.enter().is_some(), "resumed");
    }

    #[tokio::test]
    async fn closing_waits_for_writers_inside_and_lets_none_in() {
        let (offer, wake) = offer();
        let inside = offer.enter().expect("open");
        let closing = tokio::spawn({
            let wake = wake.clone();
            async move { wake.close_offers().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!closing.is_finished(), "a writer is inside");
        assert!(offer.enter().is_none(), "closing: nobody enters");
        inside.hand_over(vec![message()]).expect("taken");
        closing.await.expect("closed");
        assert_eq!(
            wake.take().handed.len(),
            1,
            "what was inside is handed over"
        );
        assert!(wake.offer_leases().is_none(), "no new offers once stopped");
    }

    #[test]
    fn a_commit_dropped_without_a_hand_over_is_released() {
        let (offer, wake) = offer();
        let mut commit = offer.enter().expect("open");
        let ids = vec![MessageId::new(), MessageId::new()];
        commit.may_write(ids.clone());
        drop(commit); // the commit failed or was cancelled
        let uncertain = wake.take().uncertain;
        assert_eq!(uncertain.len(), 1);
        assert_eq!(uncertain[0].token, offer.token());
        assert_eq!(uncertain[0].ids, ids);

        let mut commit = offer.enter().expect("open");
        commit.may_write([MessageId::new()]);
        commit.hand_over(vec![message()]).expect("taken");
        assert!(wake.take().uncertain.is_empty(), "handed over: certain");
    }

    #[test]
    fn a_hand_over_after_the_last_take_comes_back() {
        let (offer, wake) = offer();
        let late = offer.enter().expect("open");
        let taken = wake.take_last();
        assert!(taken.handed.is_empty());
        let refused = late
            .hand_over(vec![message()])
            .expect_err("the processor takes no more");
        assert_eq!(refused.token, offer.token());
        assert_eq!(refused.ids, vec![message().id]);
        assert_eq!(wake.handed_over(), 0);
    }
}
