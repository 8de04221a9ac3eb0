//! The soak's fault plan, from a seed: which fault hits when (after how
//! many events were written, so every fault falls while the writers write,
//! whatever their speed) and for how long.

use std::fmt;
use std::time::Duration;

/// How long a killed processor or subscriber stays down before its
/// supervisor starts it again.
pub(crate) const RESTART_AFTER: Duration = Duration::from_secs(1);
/// How long the broker stays down: from 2 to 10 s.
const BROKER_DOWN_MS: (u64, u64) = (2_000, 10_000);
/// Faults fall between these fractions of the events.
const SPREAD: (f64, f64) = (0.1, 0.8);

/// What is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// One of the two processor processes (SIGKILL).
    Processor,
    /// The broker (SIGKILL of nats-server; restarted on its port and store).
    Broker,
    /// The subscriber process with the inbox (SIGKILL).
    Subscriber,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Processor => "processor SIGKILL",
            Self::Broker => "broker SIGKILL",
            Self::Subscriber => "subscriber SIGKILL",
        })
    }
}

/// One fault of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Planned {
    /// What is killed.
    pub(crate) kind: FaultKind,
    /// It hits once this many events are in the outbox (or at once, if the
    /// fault before it is still going on then).
    pub(crate) after_events: u64,
    /// How long until it is started again.
    pub(crate) down: Duration,
}

/// How many faults of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FaultCounts {
    pub(crate) processor: u32,
    pub(crate) broker: u32,
    pub(crate) subscriber: u32,
}

/// The faults for `events` events, in the order they hit: the kinds
/// shuffled, each in its own slice of [`SPREAD`] at a random point of it.
pub(crate) fn plan(counts: FaultCounts, events: u64, seed: u64) -> Vec<Planned> {
    let mut rng = Rng(seed);
    let mut kinds: Vec<FaultKind> =
        std::iter::repeat_n(FaultKind::Processor, counts.processor as usize)
            .chain(std::iter::repeat_n(
                FaultKind::Broker,
                counts.broker as usize,
            ))
            .chain(std::iter::repeat_n(
                FaultKind::Subscriber,
                counts.subscriber as usize,
            ))
            .collect();
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let slice = (SPREAD.1 - SPREAD.0) / kinds.len().max(1) as f64;
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            // In the first two thirds of its slice, so the one after it
            // has room.
            let at = SPREAD.0 + slice * (i as f64 + rng.unit() * 0.66);
            let down = match kind {
                FaultKind::Broker => Duration::from_millis(
                    BROKER_DOWN_MS.0 + rng.below(BROKER_DOWN_MS.1 - BROKER_DOWN_MS.0 + 1),
                ),
                _ => RESTART_AFTER,
            };
            Planned {
                kind,
                after_events: (events as f64 * at) as u64,
                down,
            }
        })
        .collect()
}

/// SplitMix64: a few reproducible numbers from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// In `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// In `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1_u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_is_spread_over_the_events_and_reproducible() {
        let counts = FaultCounts {
            processor: 3,
            broker: 5,
            subscriber: 1,
        };
        let plan = plan(counts, 100_000, 20);
        assert_eq!(plan, super::plan(counts, 100_000, 20));
        assert_eq!(plan.len(), 9);
        assert!(
            plan.windows(2)
                .all(|w| w[0].after_events < w[1].after_events)
        );
        assert!(
            plan.iter()
                .all(|p| (10_000..80_000).contains(&p.after_events))
        );
        let brokers: Vec<_> = plan
            .iter()
            .filter(|p| p.kind == FaultKind::Broker)
            .collect();
        assert_eq!(brokers.len(), 5);
        assert!(brokers.iter().all(|p| (2..=10).contains(&p.down.as_secs())));
    }
}
