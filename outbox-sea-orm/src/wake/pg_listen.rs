//! [`PgNotifications`]: waking a processor on PostgreSQL notifications from
//! other processes.

use txoutbox_core::processor::{WakeHandle, WakeSource};

#[cfg(feature = "postgres")]
use super::notice;

/// Wakes a processor when another process commits outbox messages: `LISTEN`
/// on the outbox's channel (PostgreSQL only; see
/// [`OutboxConfig::notify_channel`](crate::OutboxConfig::notify_channel)).
/// A notification that names the committed messages has them leased by
/// primary key, as commits in the processor's own process are; one that
/// does not (a burst too large to name, a commit outside a unit of work)
/// asks for an ordinary claim.
/// After every (re)connection it asks for a catch-up claim, so
/// notifications missed while disconnected cost nothing but a short delay.
#[derive(Debug, Clone)]
pub struct PgNotifications {
    #[cfg(feature = "postgres")]
    pool: sea_orm::sqlx::PgPool,
    channel: String,
    ignored_origin: Option<String>,
}

/// Pause before listening again after the connection failed.
#[cfg(feature = "postgres")]
const RECONNECT_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

impl PgNotifications {
    /// Notifications on `db`'s outbox channel, or `None` when `db` is not
    /// PostgreSQL or notifications are disabled.
    pub fn new(db: &sea_orm::DatabaseConnection, config: &crate::OutboxConfig) -> Option<Self> {
        let channel = config.notify_channel()?.to_owned();
        #[cfg(feature = "postgres")]
        if db.get_database_backend() == sea_orm::DbBackend::Postgres {
            return Some(Self {
                pool: db.get_postgres_connection_pool().clone(),
                channel,
                ignored_origin: None,
            });
        }
        let _ = (db, channel);
        None
    }

    /// Ignores the notifications sent by one [`Outbox`](crate::Outbox) (its
    /// payload), whose commits the processor already hears in process.
    pub(crate) fn ignoring(mut self, origin: &str) -> Self {
        self.ignored_origin = Some(origin.to_owned());
        self
    }

    /// The channel listened on.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Hands a notification to the processor: the ids it carries go to the
    /// fast path (leased by primary key); without ids, a claim.
    #[cfg(feature = "postgres")]
    fn pass_on(&self, payload: &str, wake: &WakeHandle) {
        let notice = notice::decode(payload);
        if Some(notice.origin) == self.ignored_origin.as_deref() {
            return;
        }
        match notice.ids {
            Some(ids) => wake.committed(ids),
            None => wake.claim(),
        }
    }
}

impl WakeSource for PgNotifications {
    async fn run(self, wake: WakeHandle) {
        #[cfg(feature = "postgres")]
        loop {
            use sea_orm::sqlx::postgres::PgListener;
            let mut listener = match PgListener::connect_with(&self.pool).await {
                Ok(listener) => listener,
                Err(err) => {
                    tracing::warn!(error = %txoutbox_core::ErrorChain(&err), "outbox LISTEN connection failed; retrying");
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                    continue;
                }
            };
            if let Err(err) = listener.listen(&self.channel).await {
                tracing::warn!(error = %txoutbox_core::ErrorChain(&err), channel = %self.channel, "outbox LISTEN failed; retrying");
                tokio::time::sleep(RECONNECT_PAUSE).await;
                continue;
            }
            tracing::debug!(channel = %self.channel, "outbox listening for notifications");
            wake.claim(); // catch up with what was committed while not listening
            loop {
                match listener.try_recv().await {
                    Ok(Some(notification)) => self.pass_on(notification.payload(), &wake),
                    // The connection dropped; the next call reconnects.
                    Ok(None) => wake.claim(),
                    Err(err) => {
                        tracing::warn!(error = %txoutbox_core::ErrorChain(&err), "outbox LISTEN connection lost; reconnecting");
                        tokio::time::sleep(RECONNECT_PAUSE).await;
                        break;
                    }
                }
            }
        }
        #[cfg(not(feature = "postgres"))]
        let _ = wake;
    }
}
