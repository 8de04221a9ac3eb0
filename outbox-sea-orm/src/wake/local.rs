//! In this process: every commit hands its messages to the
//! [`CommitListener`]s over a broadcast channel, with no query; a listener
//! that falls behind is told so and catches up with a claim. Other processes
//! are told through [`remote`](super::remote), unless a processor of this
//! process serves the commits (it claims them itself; on PostgreSQL they are
//! even written leased to it).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sea_orm::{DatabaseConnection, DbBackend};
use tokio::sync::broadcast;
use txoutbox_core::processor::__handover::{HandoverRefused, LeaseOffer, LeasedCommit};
use txoutbox_core::processor::{WakeHandle, WakeSource};
use txoutbox_core::{MessageId, OutboxMessage};

use super::remote::{RemoteWaker, Unsent};
use crate::sync::locked;

/// How many commits a slow listener may fall behind before it is told it
/// missed some (and should claim instead).
const LISTENER_BACKLOG: usize = 4096;

/// What a [`CommitListener`] receives.
#[derive(Debug, Clone)]
pub enum CommitEvent {
    /// These messages were just committed, in this process.
    Committed(Arc<[OutboxMessage]>),
    /// The listener fell behind and missed some commits, or the application
    /// committed messages on its own transaction and called
    /// [`Outbox::wake`](crate::Outbox::wake): claim to catch up.
    Missed,
}

/// Receives the messages that units of work of this process commit: the
/// processor's fast path. Obtained from [`Outbox::listen`](crate::Outbox::listen).
#[derive(Debug)]
pub struct CommitListener {
    receiver: broadcast::Receiver<Commit>,
    /// Held by a processor's listener: this process's commits are served.
    serving: Option<Serving>,
}

/// One commit of this process as its listeners hear it (no messages: they
/// missed some, claim).
#[derive(Debug, Clone)]
pub(crate) struct Commit {
    pub(crate) messages: Arc<[OutboxMessage]>,
    /// Those written leased to the serving processor and handed to it.
    pub(crate) handed_over: Arc<HashSet<MessageId>>,
}

/// The offer of the processor serving this process's commits, if any.
type OfferSlot = Arc<Mutex<Option<LeaseOffer>>>;

/// A processor serving this process's commits, while it lives: counted (no
/// `NOTIFY`s meanwhile), and its lease offer (if it made one) withdrawn when
/// it goes.
#[derive(Debug)]
struct Serving {
    count: Arc<AtomicUsize>,
    slot: OfferSlot,
    token: Option<txoutbox_core::store::LeaseToken>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
        let mut slot = locked(&self.slot);
        if self.token.is_some() && slot.as_ref().map(LeaseOffer::token) == self.token {
            *slot = None;
        }
    }
}

impl CommitListener {
    /// The next commit, or `None` once the [`Outbox`](crate::Outbox) is gone.
    pub async fn recv(&mut self) -> Option<CommitEvent> {
        Some(match self.recv_commit().await? {
            Some(commit) => CommitEvent::Committed(commit.messages),
            None => CommitEvent::Missed,
        })
    }

    /// The next commit (`None` inside: some were missed), or `None` once the
    /// [`Outbox`](crate::Outbox) is gone.
    pub(crate) async fn recv_commit(&mut self) -> Option<Option<Commit>> {
        match self.receiver.recv().await {
            Ok(commit) if commit.messages.is_empty() => Some(None),
            Ok(commit) => Some(Some(commit)),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(None),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// Whether this is a processor's own listener (see
    /// [`Outbox::processor`](crate::Outbox::processor)).
    pub(crate) fn serves(&self) -> bool {
        self.serving.is_some()
    }

    /// For a processor's listener: offers this process's writers to lease
    /// their messages to the processor at commit.
    pub(crate) fn take_offer(&mut self, offer: LeaseOffer) {
        if let Some(serving) = &mut self.serving {
            serving.token = Some(offer.token());
            *locked(&serving.slot) = Some(offer);
        }
    }
}

/// The wake-up side of an [`Outbox`](crate::Outbox).
#[derive(Debug)]
pub(crate) struct Wakers {
    local: broadcast::Sender<Commit>,
    /// Processors of this process listening to its commits.
    serving: Arc<AtomicUsize>,
    /// Where writers find the serving processor's lease offer.
    offer: OfferSlot,
    remote: Option<RemoteWaker>,
    /// Sent as every `NOTIFY`'s payload, so this process's own processor can
    /// ignore the notifications of commits it already heard about.
    origin: String,
}

impl Wakers {
    pub(crate) fn new(db: &DatabaseConnection, channel: Option<String>) -> Self {
        let origin = uuid::Uuid::now_v7().to_string();
        let remote = channel
            .filter(|_| db.get_database_backend() == DbBackend::Postgres)
            .map(|channel| RemoteWaker::new(db.clone(), channel, origin.clone()));
        Self {
            local: broadcast::channel(LISTENER_BACKLOG).0,
            serving: Arc::new(AtomicUsize::new(0)),
            offer: OfferSlot::default(),
            remote,
            origin,
        }
    }

    /// The payload of this process's `NOTIFY`s.
    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    /// Tells local listeners to claim (messages were committed outside a
    /// unit of work) and marks other processes for a wake-up.
    pub(crate) fn wake_all(&self) {
        if self.local.receiver_count() > 0 {
            let _ = self.local.send(Commit {
                messages: Arc::from(Vec::new()),
                handed_over: Arc::default(),
            });
        }
        self.wake_remote(Unsent::claim_instead);
    }

    pub(crate) fn listen(&self) -> CommitListener {
        CommitListener {
            receiver: self.local.subscribe(),
            serving: None,
        }
    }

    /// A listener for a processor that serves this process's commits: while
    /// it lives, they send no `NOTIFY`.
    pub(crate) fn listen_to_serve(&self) -> CommitListener {
        self.serving.fetch_add(1, Ordering::AcqRel);
        CommitListener {
            receiver: self.local.subscribe(),
            serving: Some(Serving {
                count: Arc::clone(&self.serving),
                slot: Arc::clone(&self.offer),
                token: None,
            }),
        }
    }

    /// Whether a processor of this process has offered to take commits
    /// leased at commit.
    pub(crate) fn offered(&self) -> bool {
        locked(&self.offer).is_some()
    }

    /// Enters the serving processor's lease offer for one commit, if there
    /// is one and it has room.
    pub(crate) fn enter_lease(&self) -> Option<LeasedCommit> {
        locked(&self.offer).as_ref().and_then(LeaseOffer::enter)
    }

    /// Called after a commit: hands the messages written leased (`leased`,
    /// the commit's entry into the offer and their ids) to the serving
    /// processor, all of them to local listeners, and marks other processes
    /// for a coalesced wake-up.
    ///
    /// Returns the messages written leased that the processor no longer
    /// takes (it stopped meanwhile): the caller releases them.
    #[must_use = "refused messages stay leased until their lease runs out unless released"]
    pub(crate) fn committed(
        &self,
        messages: Vec<OutboxMessage>,
        leased: Option<(LeasedCommit, Vec<MessageId>)>,
    ) -> Option<HandoverRefused> {
        if messages.is_empty() {
            return None;
        }
        let mut refused = None;
        let handed_over: HashSet<MessageId> = match leased {
            Some((commit, ids)) => {
                let ids: HashSet<MessageId> = ids.into_iter().collect();
                let handed = messages
                    .iter()
                    .filter(|m| ids.contains(&m.id))
                    .cloned()
                    .collect();
                refused = commit.hand_over(handed).err();
                ids
            }
            None => HashSet::new(),
        };
        self.wake_remote(|unsent| unsent.add(messages.iter().map(|m| m.id)));
        if self.local.receiver_count() > 0 {
            // No receiver, or all gone: nothing to do, nothing buffered.
            let _ = self.local.send(Commit {
                messages: messages.into(),
                handed_over: Arc::new(handed_over),
            });
        }
        refused
    }

    /// Marks other processes for a wake-up (`announce` adds what to tell
    /// them), unless a processor of this process serves its commits: it
    /// claims them itself.
    fn wake_remote(&self, announce: impl FnOnce(&mut Unsent)) {
        let Some(remote) = &self.remote else { return };
        if self.serving.load(Ordering::Acquire) > 0 {
            return;
        }
        remote.announce(announce);
    }
}

impl WakeSource for CommitListener {
    /// Hands the ids of just-committed messages to the processor's fast path.
    /// A processor's own listener (see [`Outbox::processor`](crate::Outbox::processor))
    /// first takes the processor's lease offer, so this process's writers
    /// write their messages leased to it and hand them over themselves; it
    /// passes on the ids of the others.
    async fn run(mut self, wake: WakeHandle) {
        if self.serves()
            && let Some(offer) = wake.offer_leases()
        {
            self.take_offer(offer);
        }
        while let Some(commit) = self.recv_commit().await {
            match commit {
                Some(commit) => wake.committed(
                    commit
                        .messages
                        .iter()
                        .map(|m| m.id)
                        .filter(|id| !commit.handed_over.contains(id)),
                ),
                None => wake.claim(),
            }
        }
    }
}
