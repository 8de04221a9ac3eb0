//! [`FaultyPublisher`]: a publisher that fails on command.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use txoutbox_core::publisher::{PublishAck, PublishErrorKind};
use txoutbox_core::{OutboxMessage, PublishError, Publisher};

use super::lock;

/// A rule that rejects the messages it matches.
type Rejection = (
    Arc<dyn Fn(&OutboxMessage) -> bool + Send + Sync>,
    PublishErrorKind,
);

/// Wraps a [`Publisher`] and injects faults; clones share them, so a test
/// keeps one clone to command while the processor publishes through
/// another.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use txoutbox_core::Publisher;
/// use txoutbox_core::publisher::PublishErrorKind;
/// use txoutbox_testing::MemoryPublisher;
/// use txoutbox_testing::faults::FaultyPublisher;
///
/// let broker = MemoryPublisher::new();
/// let publisher = FaultyPublisher::new(broker.clone());
/// publisher.unavailable_for(Duration::from_secs(30));
/// assert!(!publisher.is_available());
/// publisher.heal();
/// assert!(publisher.is_available());
/// publisher.reject(|m| m.event_name == "order.poison", PublishErrorKind::Permanent);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct FaultyPublisher<P> {
    inner: P,
    faults: Arc<Mutex<Faults>>,
}

#[derive(Default)]
struct Faults {
    lost_acks: usize,
    ack_delay: Option<Duration>,
    unavailable_until: Option<Instant>,
    not_ready_until: Option<Instant>,
    rejections: Vec<Rejection>,
}

impl<P> std::fmt::Debug for FaultyPublisher<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let faults = lock(&self.faults);
        f.debug_struct("FaultyPublisher")
            .field("lost_acks", &faults.lost_acks)
            .field("ack_delay", &faults.ack_delay)
            .field("unavailable_until", &faults.unavailable_until)
            .field("not_ready_until", &faults.not_ready_until)
            .field("rejections", &faults.rejections.len())
            .finish()
    }
}

impl<P: Publisher> FaultyPublisher<P> {
    /// `inner` with no fault yet.
    pub fn new(inner: P) -> Self {
        Self {
            inner,
            faults: Arc::default(),
        }
    }

    /// The next `count` publishes reach the broker, which stores them, but
    /// their acks are lost: each fails as unavailable (a timeout), so the
    /// processor publishes it again and the broker's dedup absorbs it.
    pub fn lose_acks(&self, count: usize) {
        lock(&self.faults).lost_acks += count;
    }

    /// Every ack arrives `delay` late (None: on time again).
    pub fn delay_acks(&self, delay: Option<Duration>) {
        lock(&self.faults).ack_delay = delay;
    }

    /// The broker is unreachable for `window` from now: not available, and
    /// every publish fails as unavailable without reaching it.
    pub fn unavailable_for(&self, window: Duration) {
        lock(&self.faults).unavailable_until = Some(Instant::now() + window);
    }

    /// The broker is connected but cannot store for `window` from now
    /// (JetStream recovering its streams after a restart, or electing a
    /// leader): available, yet every publish fails as unavailable. After
    /// [`unavailable_for`](FaultyPublisher::unavailable_for) with a shorter
    /// window, it is a reconnect to a server that is not ready yet.
    pub fn not_ready_for(&self, window: Duration) {
        lock(&self.faults).not_ready_until = Some(Instant::now() + window);
    }

    /// The broker refuses every message `matches` picks, as `kind`
    /// (rejected: retried until out of attempts; permanent: dead at once),
    /// until [`heal`](FaultyPublisher::heal).
    pub fn reject(
        &self,
        matches: impl Fn(&OutboxMessage) -> bool + Send + Sync + 'static,
        kind: PublishErrorKind,
    ) {
        lock(&self.faults)
            .rejections
            .push((Arc::new(matches), kind));
    }

    /// Removes every fault.
    pub fn heal(&self) {
        *lock(&self.faults) = Faults::default();
    }

    /// The wrapped publisher.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    fn unavailable_now(&self) -> bool {
        lock(&self.faults)
            .unavailable_until
            .is_some_and(|until| Instant::now() < until)
    }

    fn not_ready_now(&self) -> bool {
        lock(&self.faults)
            .not_ready_until
            .is_some_and(|until| Instant::now() < until)
    }
}

impl<P: Publisher> Publisher for FaultyPublisher<P> {
    async fn publish(&self, message: &OutboxMessage) -> Result<PublishAck, PublishError> {
        if self.unavailable_now() {
            return Err(PublishError::unavailable(
                "injected: the broker is unreachable",
            ));
        }
        if self.not_ready_now() {
            return Err(PublishError::unavailable(
                "injected: JetStream is not ready to store",
            ));
        }
        let rejected = lock(&self.faults)
            .rejections
            .iter()
            .find(|(matches, _)| matches(message))
            .map(|(_, kind)| *kind);
        if let Some(kind) = rejected {
            return Err(PublishError::new(kind, "injected: the broker refused it"));
        }
        let ack = self.inner.publish(message).await?;
        let (lost, delay) = {
            let mut faults = lock(&self.faults);
            let lost = faults.lost_acks > 0;
            faults.lost_acks = faults.lost_acks.saturating_sub(1);
            (lost, faults.ack_delay)
        };
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        if lost {
            return Err(PublishError::unavailable(
                "injected: the ack was lost after the broker stored the message",
            ));
        }
        Ok(ack)
    }

    fn is_available(&self) -> bool {
        !self.unavailable_now() && self.inner.is_available()
    }

    fn ack_timeout(&self) -> Option<Duration> {
        self.inner.ack_timeout()
    }
}
