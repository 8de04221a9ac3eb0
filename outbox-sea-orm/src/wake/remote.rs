//! Waking processors in other processes (PostgreSQL): a background task
//! starts at most one `NOTIFY` per millisecond for all writers of this
//! process, after their commits, carrying the ids committed since the
//! previous one when they fit (see [`notice`](super::notice)).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use tokio::sync::Notify;
use txoutbox_core::MessageId;

use super::notice;
use crate::dialect::ASYNC_COMMIT;
use crate::sync::locked;

/// Shortest gap between two `NOTIFY`s of one process.
const NOTIFY_INTERVAL: Duration = Duration::from_millis(1);

/// This process's `NOTIFY` sender: what to announce, and the task that
/// sends it.
#[derive(Debug)]
pub(crate) struct RemoteWaker {
    shared: Arc<Shared>,
    task: OnceLock<()>,
}

/// State shared with the background `NOTIFY` task.
#[derive(Debug)]
struct Shared {
    db: DatabaseConnection,
    channel: String,
    origin: String,
    unsent: Mutex<Unsent>,
    closed: AtomicBool,
    notify: Notify,
}

impl RemoteWaker {
    pub(crate) fn new(db: DatabaseConnection, channel: String, origin: String) -> Self {
        Self {
            shared: Arc::new(Shared {
                db,
                channel,
                origin,
                unsent: Mutex::default(),
                closed: AtomicBool::new(false),
                notify: Notify::new(),
            }),
            task: OnceLock::new(),
        }
    }

    /// Adds to the next `NOTIFY` (`announce` says what) and starts the task
    /// that sends it the first time.
    pub(crate) fn announce(&self, announce: impl FnOnce(&mut Unsent)) {
        let shared = &self.shared;
        announce(&mut locked(&shared.unsent));
        shared.notify.notify_one();
        self.task.get_or_init(|| {
            tokio::spawn(notify_loop(Arc::clone(shared)));
        });
    }
}

impl Drop for RemoteWaker {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.notify.notify_one(); // lets the task see it is done
    }
}

/// What the next `NOTIFY` announces.
#[derive(Debug, Default)]
pub(crate) struct Unsent {
    /// Messages committed since the last `NOTIFY`, while they fit in one.
    ids: Vec<MessageId>,
    /// Too many ids, or a commit outside a unit of work: just "claim".
    claim: bool,
}

impl Unsent {
    fn is_empty(&self) -> bool {
        self.ids.is_empty() && !self.claim
    }

    pub(crate) fn add(&mut self, ids: impl IntoIterator<Item = MessageId>) {
        if self.claim {
            return;
        }
        self.ids.extend(ids);
        if self.ids.len() > notice::MAX_IDS {
            self.claim_instead();
        }
    }

    pub(crate) fn claim_instead(&mut self) {
        self.claim = true;
        self.ids = Vec::new();
    }

    fn payload(&self, origin: &str) -> String {
        let ids: &[MessageId] = if self.claim { &[] } else { &self.ids };
        notice::encode(origin, ids)
    }
}

async fn notify_loop(remote: Arc<Shared>) {
    // Committed asynchronously: a NOTIFY lost in a crash costs a poll
    // interval, and it spares the writers' WAL flushes one more waiter.
    let sql = format!("SELECT pg_notify($1, $2) FROM {ASYNC_COMMIT}");
    while !remote.closed.load(Ordering::Acquire) {
        let unsent = std::mem::take(&mut *locked(&remote.unsent));
        // `notify_one` leaves a permit when nobody waits, so a commit between
        // the take and the wait is not lost.
        if unsent.is_empty() {
            remote.notify.notified().await;
            continue;
        }
        let statement = Statement::from_sql_and_values(
            DbBackend::Postgres,
            &sql,
            [
                remote.channel.clone().into(),
                unsent.payload(&remote.origin).into(),
            ],
        );
        // The gap counts from this NOTIFY's start, so its round trip is part
        // of the gap instead of adding to the wait of the commits after it.
        let next_at = tokio::time::Instant::now() + NOTIFY_INTERVAL;
        if let Err(err) = remote.db.execute_raw(statement).await {
            // Processors fall back to polling; the next commit tries again.
            tracing::warn!(error = %txoutbox_core::ErrorChain(&err), channel = %remote.channel, "outbox NOTIFY failed");
        }
        tokio::time::sleep_until(next_at).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsent_ids_past_one_notification_turn_into_a_claim() {
        let mut unsent = Unsent::default();
        assert!(unsent.is_empty());
        let ids: Vec<MessageId> = (0..notice::MAX_IDS).map(|_| MessageId::new()).collect();
        unsent.add(ids.clone());
        assert_eq!(unsent.payload("o"), notice::encode("o", &ids));

        unsent.add([MessageId::new()]);
        assert!(unsent.claim && unsent.ids.is_empty(), "{unsent:?}");
        unsent.add([MessageId::new()]);
        assert!(unsent.ids.is_empty(), "a claim stays a claim");
        assert_eq!(unsent.payload("o"), "o");
    }
}
