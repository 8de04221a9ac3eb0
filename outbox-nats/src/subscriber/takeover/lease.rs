//! The reader lease (see [`SubscriberBuilder::reader_lease`](crate::subscriber::SubscriberBuilder::reader_lease)):
//! one process reads a durable that keeps order, as the inbox's database
//! says, whatever the broker says.
//!
//! A process takes the lease of each JetStream consumer it reads (the
//! durable, or one per owned partition) before its first pull: until it
//! holds all of them it *stands by*, pulling nothing (so the server
//! delivers it nothing, and with failover never pins it). Holding them, it
//! reads in a *session*: the restart guard first (what a previous reader
//! held and did not apply is waited for and handed back), then the fetch
//! loop. It renews the leases every third of their duration and counts
//! each as held until `sent + 9/10 × duration` by its own monotonic clock,
//! `sent` being when it sent the renewal: the database's expiry is at
//! least that late, so this process stops before any other may start.
//!
//! - **Renewal fails** (the database is away): what was taken goes on; once
//!   the lease's time is up by that reckoning, no handler starts and the
//!   fetch loop stops pulling, hands back what the client buffered and
//!   keeps what it holds alive. When a renewal succeeds again with the
//!   same token (nobody took the lease meanwhile), the session goes on.
//! - **Another process has it** (or took it and gave it back: the token
//!   grew): the lease is lost. The session ends as a shutdown does (no
//!   handler starts; what waits is handed back; running handlers finish),
//!   and the process stands by again.
//! - **Shutdown**: the session drains, then the leases are ended so that a
//!   standby takes over within a fifth of the lease's duration.
//!
//! The sessions and the standing by are in [`standby`](super::standby).
//!
//! Handlers start only through [`Shared::slot`](crate::subscriber::setup::shared::Shared::slot),
//! which checks the [`Gate`] after taking the handler slot, so a process
//! waking from a freeze past its lease starts nothing; and the inbox
//! (`txoutbox_sea_orm::Inbox`) checks the lease's fencing token in each
//! transaction before it commits, so what was running does not commit.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use txoutbox_core::ErrorChain;
use txoutbox_core::consumer::{ConsumerInbox, ReaderLease};

/// The lease's duration by default: a crashed reader is replaced about
/// this long after its last renewal. Under the failover pin timeout (4 s),
/// so that with failover the lease adds nothing to a takeover.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(3);

/// The shortest lease accepted: renewals every third of it, and a database
/// round trip must fit many times in one.
pub(crate) const MIN_LEASE: Duration = Duration::from_secs(1);

/// Whether `inbox` keeps reader leases: its
/// [`take_lease`](ConsumerInbox::take_lease) answers `Some` (without I/O:
/// the future, not awaited, does the work).
pub(crate) fn keeps_leases(inbox: &dyn ConsumerInbox) -> bool {
    inbox.take_lease("", "", MIN_LEASE).is_some()
}

/// How often a standby asks for the lease: a fifth of its duration,
/// between 200 ms and 1 s.
pub(super) fn standby_poll(duration: Duration) -> Duration {
    (duration / 5).clamp(Duration::from_millis(200), Duration::from_secs(1))
}

/// The lease of a subscriber: where it is kept, for how long, by whom.
pub(crate) struct Lease {
    /// The inbox whose database keeps it.
    pub(crate) inbox: Arc<dyn ConsumerInbox>,
    /// How long each take or renewal holds it, by the database's clock.
    pub(crate) duration: Duration,
    /// This process's name as holder: `HOSTNAME` (when set), the process
    /// id and a random part.
    pub(crate) holder: String,
}

impl Lease {
    /// The lease kept by `inbox`, held `duration` at a time, if the inbox
    /// keeps leases.
    pub(crate) fn of(inbox: Arc<dyn ConsumerInbox>, duration: Duration) -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_default();
        let holder = format!(
            "{host}{}pid {} {}",
            if host.is_empty() { "" } else { " " },
            std::process::id(),
            txoutbox_core::MessageId::new()
        );
        Self {
            inbox,
            duration,
            holder,
        }
    }

    /// Takes or renews every lease of `names`: their tokens when this
    /// process holds all of them, the other holder of the first it does
    /// not; `None` when this inbox keeps no leases.
    pub(super) async fn take(
        &self,
        names: &[String],
    ) -> Result<Taken, Box<dyn std::error::Error + Send + Sync>> {
        let mut tokens = Vec::with_capacity(names.len());
        for name in names {
            let Some(taking) = self.inbox.take_lease(name, &self.holder, self.duration) else {
                return Ok(Taken::Unsupported);
            };
            match taking.await? {
                ReaderLease::Ours { token } => tokens.push(token),
                ReaderLease::Theirs { holder } => {
                    return Ok(Taken::Theirs {
                        name: name.clone(),
                        holder,
                        ours: names[..tokens.len()].to_vec(),
                    });
                }
            }
        }
        Ok(Taken::Ours(tokens))
    }

    /// Ends this process's leases of `names`; failures are logged (the
    /// leases then expire).
    pub(super) async fn end(&self, consumer: &str, names: &[String]) {
        for name in names {
            if let Err(err) = self.inbox.end_lease(name, &self.holder).await {
                tracing::warn!(consumer, lease = %name, error = %ErrorChain(&*err), "cannot give up the reader lease; another process takes it when it expires");
            }
        }
    }

    /// Until when, by this process's clock, a take or renewal sent at
    /// `sent` holds: nine tenths of the duration, a margin for clocks that
    /// run at slightly different rates.
    pub(super) fn until(&self, sent: Instant) -> Instant {
        sent + self.duration * 9 / 10
    }
}

/// What [`Lease::take`] found.
pub(super) enum Taken {
    /// This process holds every lease, with these tokens.
    Ours(Vec<u64>),
    /// Another process holds `name`; this process took `ours` before it.
    Theirs {
        name: String,
        holder: String,
        ours: Vec<String>,
    },
    /// The inbox keeps no leases.
    Unsupported,
}

/// Whether handlers may start: always without a lease; with one, while it
/// is held by this process's reckoning.
pub(crate) struct Gate {
    leased: bool,
    /// Until when the lease holds; `None` while it is not held.
    until: watch::Sender<Option<Instant>>,
}

impl Gate {
    /// A gate that is always open (`leased` false) or open while a lease
    /// is held (closed until then).
    pub(crate) fn new(leased: bool) -> Self {
        Self {
            leased,
            until: watch::Sender::new(None),
        }
    }

    /// Whether this subscriber reads under a lease.
    pub(crate) fn is_leased(&self) -> bool {
        self.leased
    }

    /// Whether handlers may start now.
    pub(crate) fn holds(&self) -> bool {
        !self.leased
            || self
                .until
                .borrow()
                .is_some_and(|until| until > Instant::now())
    }

    /// Resolves once handlers may start.
    pub(crate) async fn held(&self) {
        let mut changes = self.until.subscribe();
        while !self.holds() {
            if changes.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Resolves once handlers may no longer start (never without a lease).
    pub(crate) async fn expired(&self) {
        if !self.leased {
            return std::future::pending().await;
        }
        let mut changes = self.until.subscribe();
        loop {
            let until = *changes.borrow_and_update();
            match until {
                Some(until) if until > Instant::now() => {
                    tokio::select! {
                        () = tokio::time::sleep_until(until) => {}
                        changed = changes.changed() => if changed.is_err() {
                            return std::future::pending().await;
                        },
                    }
                }
                _ => return,
            }
        }
    }

    pub(super) fn set(&self, until: Option<Instant>) {
        self.until.send_replace(until);
    }
}
