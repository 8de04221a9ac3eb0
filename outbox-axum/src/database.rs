//! [`DatabaseProbe`]: whether the runtime's database answers, for
//! `/health/ready`.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use txoutbox_core::ErrorChain;
use txoutbox_core::store::OutboxStore;
use txoutbox_nats::subscriber::SubscriberProbe;

/// Asks a database whether it answers: the processor's store
/// ([`OutboxStore::probe`]) or a subscriber's inbox
/// ([`ConsumerInbox::probe`](txoutbox_core::consumer::ConsumerInbox::probe)).
#[derive(Clone)]
pub(crate) struct DatabaseProbe {
    ask: Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>,
}

impl std::fmt::Debug for DatabaseProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseProbe").finish_non_exhaustive()
    }
}

/// What a [`RuntimeHealth`](crate::RuntimeHealth) found of its database.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DatabaseStatus {
    /// It answered and takes writes.
    Up,
    /// It did not answer within the probe timeout, or refused: why.
    Down(String),
    /// Not checked: the runtime has neither a processor built by it (whose
    /// store it asks) nor a subscriber applying through an inbox.
    Unchecked,
}

impl DatabaseStatus {
    /// Whether it keeps the runtime from being ready: only [`Down`](Self::Down).
    pub fn is_down(&self) -> bool {
        matches!(self, Self::Down(_))
    }
}

impl DatabaseProbe {
    /// Probes `store` ([`OutboxStore::probe`]).
    pub(crate) fn store<S: OutboxStore + 'static>(store: Arc<S>) -> Self {
        Self {
            ask: Arc::new(move || {
                let store = Arc::clone(&store);
                Box::pin(async move {
                    store
                        .probe()
                        .await
                        .map_err(|err| ErrorChain(&err).to_string())
                })
            }),
        }
    }

    /// Probes the inbox of the subscriber `probe` watches, if it has one.
    pub(crate) fn inbox(probe: &SubscriberProbe) -> Option<Self> {
        // A probe's future does nothing until awaited: asked for one only to
        // learn whether there is an inbox.
        probe.probe_inbox().map(drop)?;
        let probe = probe.clone();
        Some(Self {
            ask: Arc::new(move || {
                let asked = probe.probe_inbox();
                Box::pin(async move {
                    match asked {
                        Some(asked) => asked.await.map_err(|err| ErrorChain(&*err).to_string()),
                        None => Ok(()),
                    }
                })
            }),
        })
    }

    /// Asks, waiting at most `timeout`.
    pub(crate) async fn check(&self, timeout: Duration) -> DatabaseStatus {
        match tokio::time::timeout(timeout, (self.ask)()).await {
            Ok(Ok(())) => DatabaseStatus::Up,
            Ok(Err(error)) => DatabaseStatus::Down(error),
            Err(_) => DatabaseStatus::Down(format!("no answer within {} ms", timeout.as_millis())),
        }
    }

    /// A probe answering `answer` each time, for tests.
    #[cfg(test)]
    pub(crate) fn answering(answer: Result<(), String>) -> Self {
        Self {
            ask: Arc::new(move || Box::pin(std::future::ready(answer.clone()))),
        }
    }
}
