//! [`Doubling`]: the pause before trying something again, doubling up to a
//! ceiling, with jitter, so that many processes or tasks that failed
//! together (a shared broker or database outage) do not come back in
//! lockstep.

use std::time::Duration;

/// A pause that doubles from `first` up to `max` with each failure, each
/// one drawn at random from its upper half (`[p/2, p]`, "equal jitter").
///
/// ```
/// use std::time::Duration;
/// use txoutbox_core::backoff::Doubling;
///
/// let mut pause = Doubling::new(Duration::from_millis(100), Duration::from_secs(1));
/// let first = pause.next_pause();
/// assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
/// for _ in 0..10 {
///     assert!(pause.next_pause() <= Duration::from_secs(1));
/// }
/// pause.reset(); // it worked: the next failure starts from `first` again
/// assert!(pause.next_pause() <= Duration::from_millis(100));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doubling {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Doubling {
    /// Pauses from `first` (the first failure) doubling up to `max`.
    pub fn new(first: Duration, max: Duration) -> Self {
        let max = max.max(first);
        Self {
            first,
            max,
            next: first,
        }
    }

    /// The pause after one more failure: the current step, jittered, and
    /// the step doubles for the next.
    pub fn next_pause(&mut self) -> Duration {
        let step = self.next;
        self.next = step.saturating_mul(2).min(self.max);
        jittered(step)
    }

    /// The step the next failure pauses for, before jitter.
    pub fn current(&self) -> Duration {
        self.next
    }

    /// Back to `first` (after a success).
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

/// `pause` drawn at random from `[pause/2, pause]`.
///
/// ```
/// use std::time::Duration;
/// let pause = txoutbox_core::backoff::jittered(Duration::from_secs(2));
/// assert!(pause >= Duration::from_secs(1) && pause <= Duration::from_secs(2));
/// ```
pub fn jittered(pause: Duration) -> Duration {
    let half = pause / 2;
    half + half.mul_f64(unit_random())
}

/// A random number in `[0, 1)`: SipHash, keyed by std's per-process random
/// keys (a fresh key per call), of a counter. No RNG dependency, and draws
/// made in the same instant differ (UUIDv7 bits, used before, are a counter
/// within a millisecond, so bursts of draws came out nearly equal).
pub(crate) fn unit_random() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(DRAWS.fetch_add(1, Ordering::Relaxed));
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_within_jitter_and_caps() {
        let mut pause = Doubling::new(Duration::from_millis(100), Duration::from_millis(800));
        let steps: Vec<u128> = (0..6)
            .map(|_| {
                let step = pause.current();
                let drawn = pause.next_pause();
                assert!(
                    drawn >= step / 2 && drawn <= step,
                    "{drawn:?} outside {step:?}"
                );
                step.as_millis()
            })
            .collect();
        assert_eq!(steps, [100, 200, 400, 800, 800, 800]);
        pause.reset();
        assert_eq!(pause.current(), Duration::from_millis(100));
    }

    #[test]
    fn jitter_spreads() {
        let drawn: std::collections::HashSet<Duration> =
            (0..50).map(|_| jittered(Duration::from_secs(10))).collect();
        assert!(drawn.len() > 40, "draws repeat: {}", drawn.len());
        let spread = *drawn.iter().max().expect("draws") - *drawn.iter().min().expect("draws");
        assert!(
            spread > Duration::from_secs(2),
            "draws bunch together: {spread:?}"
        );
    }
}
