//! How long ago the publisher's connection was re-established: a server
//! that just restarted answers "no responders" for streams it has not
//! recovered yet, which must not read as "no stream captures the subject".

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::Client;
use tokio::time::Instant;

/// After a reconnect, how long "no stream captures the subject" still counts
/// as the broker not being ready (no attempt spent) rather than as the
/// message's problem. A server restores its streams from disk within
/// seconds of accepting connections.
pub(crate) const STREAM_RECOVERY_GRACE: Duration = Duration::from_secs(10);

/// Watches the client's connect count (`Statistics::connects`).
#[derive(Debug, Clone)]
pub(crate) struct Reconnects {
    /// The connect count last seen, and when a change of it was first seen
    /// (`None` until a reconnect happened after the publisher was made).
    seen: Arc<Mutex<(u64, Option<Instant>)>>,
}

impl Reconnects {
    pub(crate) fn new(client: &Client) -> Self {
        let connects = connects(client);
        Self {
            seen: Arc::new(Mutex::new((connects, None))),
        }
    }

    /// Whether the connection was re-established less than
    /// [`STREAM_RECOVERY_GRACE`] ago (as far as this publisher has seen).
    pub(crate) fn recently(&self, client: &Client) -> bool {
        self.observe(connects(client), Instant::now())
    }

    fn observe(&self, connects: u64, now: Instant) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if connects != seen.0 {
            *seen = (connects, Some(now));
        }
        seen.1
            .is_some_and(|since| now.duration_since(since) < STREAM_RECOVERY_GRACE)
    }
}

fn connects(client: &Client) -> u64 {
    client
        .statistics()
        .connects
        .load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watching(connects: u64) -> Reconnects {
        Reconnects {
            seen: Arc::new(Mutex::new((connects, None))),
        }
    }

    #[test]
    fn only_a_reconnect_opens_the_grace_and_it_ends() {
        let reconnects = watching(1);
        let start = Instant::now();
        assert!(
            !reconnects.observe(1, start),
            "the first connection: no grace"
        );
        assert!(reconnects.observe(2, start), "reconnected just now");
        let later = start + STREAM_RECOVERY_GRACE - Duration::from_millis(1);
        assert!(reconnects.observe(2, later));
        assert!(!reconnects.observe(2, start + STREAM_RECOVERY_GRACE));
        let again = start + STREAM_RECOVERY_GRACE * 3;
        assert!(reconnects.observe(3, again), "another reconnect");
    }
}
