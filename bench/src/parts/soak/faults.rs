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
/// How long the database stays down: from 5 to 20 s (the first of the
/// run's database outages longer than the stream's duplicate window,
/// see [`plan`]).
const DATABASE_DOWN_MS: (u64, u64) = (5_000, 20_000);
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
    /// The PostgreSQL server of the outbox and the inbox (`pg_ctl stop -m
    /// immediate`; started again on its port and data).
    Database,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Processor => "processor SIGKILL",
            Self::Broker => "broker SIGKILL",
            Self::Subscriber => "subscriber SIGKILL",
            Self::Database => "database crash",
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
    pub(crate) database: u32,
}

/// The faults for `events` events, in the order they hit: the kinds
/// shuffled, each in its own slice of [`SPREAD`] at a random point of it.
/// The first database outage lasts from `window` + 2 s to 20 s (longer
/// than the stream's duplicate window, so anything published before it
/// and published again after it is stored twice unless the processor
/// remembered it), the others 5-20 s.
pub(crate) fn plan(counts: FaultCounts, events: u64, seed: u64, window: Duration) -> Vec<Planned> {
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
            .chain(std::iter::repeat_n(
                FaultKind::Database,
                counts.database as usize,
            ))
            .collect();
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let slice = (SPREAD.1 - SPREAD.0) / kinds.len().max(1) as f64;
    let longer = (window.as_millis() as u64 + 2_000).min(DATABASE_DOWN_MS.1);
    let mut database_outages = 0;
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            // In the first two thirds of its slice, so the one after it
            // has room.
            let at = SPREAD.0 + slice * (i as f64 + rng.unit() * 0.66);
            let down = match kind {
                FaultKind::Broker => rng.between(BROKER_DOWN_MS),
                FaultKind::Database => {
                    database_outages += 1;
                    let from = if database_outages == 1 {
                        longer
                    } else {
                        DATABASE_DOWN_MS.0
                    };
                    rng.between((from, DATABASE_DOWN_MS.1))
                }
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

    /// Milliseconds in `from..=to`, as a duration.
    fn between(&mut self, (from, to): (u64, u64)) -> Duration {
        Duration::from_millis(from + self.below(to.saturating_sub(from) + 1))
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
            database: 2,
        };
        let window = Duration::from_secs(12);
        let plan = plan(counts, 100_000, 20, window);
        assert_eq!(plan, super::plan(counts, 100_000, 20, window));
        assert_eq!(plan.len(), 11);
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
        let databases: Vec<_> = plan
            .iter()
            .filter(|p| p.kind == FaultKind::Database)
            .map(|p| p.down)
            .collect();
        assert_eq!(databases.len(), 2);
        assert!(databases[0] >= window + Duration::from_secs(2));
        assert!(
            databases
                .iter()
                .all(|d| (5_000..=20_000).contains(&d.as_millis()))
        );
    }
}
