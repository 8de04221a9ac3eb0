//! [`Backoff`]: how long a failed message waits before its next delivery.

use std::time::Duration;

/// The delay before a message whose handler failed is delivered again, as a
/// function of how many times it has been delivered.
///
/// The subscriber naks the message with this delay, jittered into its upper
/// half ([`jittered_delay`](Self::jittered_delay), so messages that failed
/// together do not come back together), as `-NAK {"delay": ...}`: JetStream
/// itself holds it back; nothing waits in the subscriber.
/// Exponential by default: `initial × 2^(deliveries - 1)`, capped at `max`.
///
/// | after delivery | default delay |
/// |---|---|
/// | 1 | 1 s |
/// | 2 | 2 s |
/// | 3 | 4 s |
/// | n | min(2^(n-1) s, 5 min) |
///
/// ```
/// use std::time::Duration;
/// use txoutbox_nats::subscriber::Backoff;
/// let backoff = Backoff::exponential(Duration::from_millis(100), Duration::from_secs(1));
/// assert_eq!(backoff.delay(1), Duration::from_millis(100));
/// assert_eq!(backoff.delay(3), Duration::from_millis(400));
/// assert_eq!(backoff.delay(10), Duration::from_secs(1));
/// assert_eq!(Backoff::fixed(Duration::from_secs(5)).delay(7), Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    exponential: bool,
}

impl Backoff {
    /// Doubles from `initial` with each delivery, up to `max`.
    pub fn exponential(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max: max.max(initial),
            exponential: true,
        }
    }

    /// The same delay after every delivery.
    pub fn fixed(delay: Duration) -> Self {
        Self {
            initial: delay,
            max: delay,
            exponential: false,
        }
    }

    /// The delay the subscriber naks with after the `delivery`-th delivery
    /// failed: [`delay`](Self::delay) drawn at random from its upper half
    /// (`[d/2, d]`), so messages that failed together (a database outage
    /// every handler hit) do not all come back in the same instant.
    pub fn jittered_delay(&self, delivery: u64) -> Duration {
        txoutbox_core::backoff::jittered(self.delay(delivery))
    }

    /// The delay after the `delivery`-th delivery failed (1 for the first),
    /// before jitter.
    pub fn delay(&self, delivery: u64) -> Duration {
        if !self.exponential {
            return self.initial;
        }
        let doublings = u32::try_from(delivery.saturating_sub(1))
            .unwrap_or(u32::MAX)
            .min(32);
        self.initial
            .checked_mul(1u32 << doublings.min(31))
            .map_or(self.max, |delay| delay.min(self.max))
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::exponential(Duration::from_secs(1), Duration::from_secs(300))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps_without_overflow() {
        let backoff = Backoff::default();
        let delays: Vec<u64> = (1..=10).map(|n| backoff.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
        assert_eq!(backoff.delay(0), Duration::from_secs(1));
        assert_eq!(backoff.delay(u64::MAX), Duration::from_secs(300));
    }
}
