//! Per-aggregate lanes: messages of one aggregate one after another, in
//! stream order; different aggregates in parallel.
//!
//! A lane has at most one worker. Messages that arrive while it is busy
//! wait in its queue, sorted by stream sequence; they keep their in-flight
//! permit, so what the subscriber holds stays bounded.
//!
//! When a handler fails and its message is nakked for a later delivery, the
//! message is *away*: the lane remembers it until it comes back (or until a
//! grace period after it was due, when it went to another process or was
//! lost). Anything later of the same aggregate — messages waiting in the
//! queue, and messages that arrive meanwhile — is *deferred*: nakked with a
//! delay that brings it back just after the earliest message away. Nothing
//! of a failing aggregate is held in memory, so a failing aggregate cannot
//! take the capacity of the others, and its messages are still handled in
//! stream order. Deferring costs a delivery: a message deferred on its last
//! allowed delivery is kept in the queue instead (it would otherwise never be
//! delivered again), waiting for the earlier ones.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::time::Instant;

/// Identifies an aggregate: its type and id.
pub(crate) type LaneKey = Arc<str>;

/// The key of the aggregate `(aggregate_type, aggregate_id)`.
pub(crate) fn lane_key(aggregate_type: &str, aggregate_id: &str) -> LaneKey {
    format!("{aggregate_type}\u{1f}{aggregate_id}").into()
}

/// How long after the earliest message away a deferred one comes back.
const DEFER_MARGIN: Duration = Duration::from_millis(50);

/// A message waiting in, or taken from, a lane.
#[derive(Debug)]
pub(crate) struct Queued<T> {
    /// The message.
    pub(crate) item: T,
    /// Its stream sequence.
    pub(crate) sequence: u64,
    /// Whether JetStream will not deliver it again (so it must not be deferred).
    pub(crate) last_delivery: bool,
    /// Its share of `max_in_flight`, released when it is dropped.
    #[allow(dead_code, reason = "held for its Drop")]
    pub(crate) permit: Option<OwnedSemaphorePermit>,
}

/// What to do with a message that arrived.
#[derive(Debug)]
pub(crate) enum Admission<T> {
    /// It is queued and no worker drives its lane: start one.
    Start,
    /// It is queued behind a running worker.
    Queued,
    /// A earlier message of its aggregate is away: nak it with this delay.
    Defer(Queued<T>, Duration),
}

/// What a worker does next.
pub(crate) enum Next<T> {
    /// Handle this message.
    Run(Queued<T>),
    /// The next message must wait for an earlier one that is away: wait for
    /// `wake` (an arrival) or `until` (that message's grace ends).
    Wait { wake: Arc<Notify>, until: Instant },
    /// Nothing to do; the worker ends.
    Done,
}

#[derive(Debug, Clone, Copy)]
struct Away {
    /// When JetStream should deliver it again.
    due: Instant,
    /// When the lane stops waiting for it.
    expires: Instant,
}

struct Lane<T> {
    queue: VecDeque<Queued<T>>,
    away: BTreeMap<u64, Away>,
    worker: bool,
    wake: Arc<Notify>,
}

impl<T> Lane<T> {
    fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            away: BTreeMap::new(),
            worker: false,
            wake: Arc::new(Notify::new()),
        }
    }

    /// Forgets messages away past their grace.
    fn prune(&mut self, now: Instant) {
        self.away.retain(|sequence, away| {
            let keep = away.expires > now;
            if !keep {
                tracing::debug!(
                    stream_sequence = sequence,
                    "a message away did not come back in time; later ones of its aggregate go on"
                );
            }
            keep
        });
    }

    /// The first message away, if it is earlier than `sequence`.
    fn earlier_away(&self, sequence: u64) -> Option<(u64, Away)> {
        self.away
            .first_key_value()
            .filter(|(first, _)| **first < sequence)
            .map(|(first, away)| (*first, *away))
    }

    /// Marks `sequence` away and returns the delay that brings it back just
    /// after the earliest message away (or after `delay`, if it is the
    /// earliest).
    fn send_away(&mut self, sequence: u64, now: Instant, grace: Duration) -> Duration {
        let delay = match self.earlier_away(sequence) {
            // Back after the earlier one is due, or, if it is late, after it
            // stops being waited for.
            Some((_, earlier)) => {
                let target = if earlier.due > now {
                    earlier.due
                } else {
                    earlier.expires
                };
                target.saturating_duration_since(now) + DEFER_MARGIN
            }
            None => DEFER_MARGIN,
        };
        self.away.insert(
            sequence,
            Away {
                due: now + delay,
                expires: now + delay + grace,
            },
        );
        delay
    }

    fn queue_sorted(&mut self, queued: Queued<T>) {
        let at = self.queue.partition_point(|q| q.sequence < queued.sequence);
        self.queue.insert(at, queued);
    }
}

/// Every active lane.
pub(crate) struct Lanes<T> {
    lanes: Arc<Mutex<HashMap<LaneKey, Lane<T>>>>,
    grace: Duration,
}

impl<T> Clone for Lanes<T> {
    fn clone(&self) -> Self {
        Self {
            lanes: Arc::clone(&self.lanes),
            grace: self.grace,
        }
    }
}

impl<T> Lanes<T> {
    /// Lanes that wait `grace` past its due time for a message away.
    pub(crate) fn new(grace: Duration) -> Self {
        Self {
            lanes: Arc::default(),
            grace,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<LaneKey, Lane<T>>> {
        // No code panics while holding the lock; recover the map regardless.
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a message that arrived for `key`.
    pub(crate) fn admit(&self, key: &LaneKey, queued: Queued<T>) -> Admission<T> {
        let now = Instant::now();
        let mut lanes = self.lock();
        let lane = lanes.entry(Arc::clone(key)).or_insert_with(Lane::new);
        lane.prune(now);
        // The earliest message away came back: it goes first.
        if lane.away.first_key_value().map(|(first, _)| *first) == Some(queued.sequence) {
            lane.away.remove(&queued.sequence);
        } else if lane.earlier_away(queued.sequence).is_some() && !queued.last_delivery {
            let delay = lane.send_away(queued.sequence, now, self.grace);
            return Admission::Defer(queued, delay);
        } else {
            // Not away any more, if it was (it came back early or late).
            lane.away.remove(&queued.sequence);
        }
        lane.queue_sorted(queued);
        if lane.worker {
            lane.wake.notify_one();
            Admission::Queued
        } else {
            lane.worker = true;
            Admission::Start
        }
    }

    /// `sequence` failed and is nakked with `delay`: it is away until it
    /// comes back. Returns the messages waiting behind it, to defer with
    /// their delays (those on their last delivery stay).
    pub(crate) fn send_away(
        &self,
        key: &LaneKey,
        sequence: u64,
        delay: Duration,
    ) -> Vec<(Queued<T>, Duration)> {
        let now = Instant::now();
        let mut lanes = self.lock();
        let Some(lane) = lanes.get_mut(key) else {
            return Vec::new();
        };
        lane.away.insert(
            sequence,
            Away {
                due: now + delay,
                expires: now + delay + self.grace,
            },
        );
        let (stay, behind): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut lane.queue)
            .into_iter()
            .partition(|q| q.last_delivery || q.sequence < sequence);
        lane.queue = stay;
        behind
            .into_iter()
            .map(|queued| {
                let delay = lane.send_away(queued.sequence, now, self.grace);
                (queued, delay)
            })
            .collect()
    }

    /// The next message of `key`'s lane for its worker. With `draining`,
    /// nothing waits: every queued message is handed out to be handed back.
    pub(crate) fn next(&self, key: &LaneKey, draining: bool) -> Next<T> {
        let now = Instant::now();
        let mut lanes = self.lock();
        let Some(lane) = lanes.get_mut(key) else {
            return Next::Done;
        };
        lane.prune(now);
        let Some(front) = lane.queue.front() else {
            lane.worker = false;
            if lane.away.is_empty() {
                lanes.remove(key);
            }
            return Next::Done;
        };
        if !draining && let Some((_, earlier)) = lane.earlier_away(front.sequence) {
            return Next::Wait {
                wake: Arc::clone(&lane.wake),
                until: earlier.expires,
            };
        }
        match lane.queue.pop_front() {
            Some(queued) => Next::Run(queued),
            None => Next::Done,
        }
    }

    /// Removes `key`'s lane (its worker died) and returns what waited in it.
    pub(crate) fn release(&self, key: &LaneKey) -> Vec<Queued<T>> {
        self.lock()
            .remove(key)
            .map(|lane| lane.queue.into())
            .unwrap_or_default()
    }

    /// Drops lanes left with nothing but messages away past their grace.
    pub(crate) fn sweep(&self) {
        let now = Instant::now();
        self.lock().retain(|_, lane| {
            lane.prune(now);
            lane.worker || !lane.queue.is_empty() || !lane.away.is_empty()
        });
    }

    /// Applies `f` to every message waiting in `key`'s lane.
    pub(crate) fn for_each_waiting<R>(&self, key: &LaneKey, f: impl Fn(&T) -> R) -> Vec<R> {
        self.lock()
            .get(key)
            .map(|lane| lane.queue.iter().map(|q| f(&q.item)).collect())
            .unwrap_or_default()
    }

    /// How many lanes exist.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(2);

    fn q(sequence: u64) -> Queued<u64> {
        Queued {
            item: sequence,
            sequence,
            last_delivery: false,
            permit: None,
        }
    }

    fn run(next: Next<u64>) -> u64 {
        match next {
            Next::Run(q) => q.item,
            Next::Wait { .. } => panic!("waits"),
            Next::Done => panic!("done"),
        }
    }

    fn deferred(admission: Admission<u64>) -> Duration {
        match admission {
            Admission::Defer(_, delay) => delay,
            other => panic!("not deferred: {other:?}"),
        }
    }

    #[tokio::test]
    async fn one_worker_per_aggregate_in_stream_order() {
        let lanes = Lanes::new(GRACE);
        let (a, b) = (lane_key("order", "1"), lane_key("order", "2"));
        assert!(matches!(lanes.admit(&a, q(1)), Admission::Start));
        assert!(matches!(lanes.admit(&b, q(2)), Admission::Start));
        assert!(matches!(lanes.admit(&a, q(4)), Admission::Queued));
        assert!(matches!(lanes.admit(&a, q(3)), Admission::Queued));
        assert_eq!(run(lanes.next(&a, false)), 1);
        assert_eq!(run(lanes.next(&a, false)), 3, "sorted by stream sequence");
        assert_eq!(run(lanes.next(&a, false)), 4);
        assert!(matches!(lanes.next(&a, false), Next::Done));
        assert_eq!(run(lanes.next(&b, false)), 2);
        assert!(matches!(lanes.next(&b, false), Next::Done));
        assert_eq!(lanes.len(), 0);
        assert!(matches!(lanes.admit(&a, q(5)), Admission::Start));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_message_defers_what_follows_until_it_is_back() {
        let lanes = Lanes::new(GRACE);
        let a = lane_key("order", "1");
        assert!(matches!(lanes.admit(&a, q(1)), Admission::Start));
        assert!(matches!(lanes.admit(&a, q(2)), Admission::Queued));
        assert_eq!(run(lanes.next(&a, false)), 1);
        // 1 fails, nakked for 1 s: 2, waiting behind it, is deferred past it.
        let behind = lanes.send_away(&a, 1, Duration::from_secs(1));
        assert_eq!(behind.len(), 1);
        assert_eq!(behind[0].1, Duration::from_secs(1) + DEFER_MARGIN);
        assert!(matches!(lanes.next(&a, false), Next::Done));
        // A new message arrives meanwhile: deferred past 1 too.
        assert_eq!(
            deferred(lanes.admit(&a, q(3))),
            Duration::from_secs(1) + DEFER_MARGIN
        );
        // 2 comes back early (before 1): deferred again.
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(deferred(lanes.admit(&a, q(2))) > Duration::from_millis(500));
        // 1 is back: it runs; then 2, then 3 as they come back.
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(matches!(lanes.admit(&a, q(1)), Admission::Start));
        assert_eq!(run(lanes.next(&a, false)), 1);
        assert!(matches!(lanes.next(&a, false), Next::Done));
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(matches!(lanes.admit(&a, q(2)), Admission::Start));
        assert!(matches!(lanes.admit(&a, q(3)), Admission::Queued));
        assert_eq!(run(lanes.next(&a, false)), 2);
        assert_eq!(run(lanes.next(&a, false)), 3);
        assert!(matches!(lanes.next(&a, false), Next::Done));
        assert_eq!(lanes.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_last_delivery_waits_instead_and_a_lost_message_is_given_up() {
        let lanes = Lanes::new(GRACE);
        let a = lane_key("order", "1");
        let _ = lanes.admit(&a, q(1));
        assert_eq!(run(lanes.next(&a, false)), 1);
        assert!(lanes.send_away(&a, 1, Duration::from_secs(1)).is_empty());
        let last = Queued {
            last_delivery: true,
            ..q(2)
        };
        assert!(matches!(lanes.admit(&a, last), Admission::Queued));
        assert!(matches!(lanes.next(&a, false), Next::Wait { .. }));
        // 1 never comes back (another process took it): after its grace, 2 runs.
        tokio::time::advance(Duration::from_secs(1) + GRACE).await;
        assert_eq!(run(lanes.next(&a, false)), 2);
        assert!(matches!(lanes.next(&a, false), Next::Done));
        lanes.sweep();
        assert_eq!(lanes.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn draining_hands_out_everything() {
        let lanes = Lanes::new(GRACE);
        let a = lane_key("order", "1");
        let _ = lanes.admit(&a, q(1));
        assert_eq!(run(lanes.next(&a, false)), 1);
        let _ = lanes.send_away(&a, 1, Duration::from_secs(1));
        let last = Queued {
            last_delivery: true,
            ..q(2)
        };
        let _ = lanes.admit(&a, last);
        assert_eq!(run(lanes.next(&a, true)), 2);
    }
}
