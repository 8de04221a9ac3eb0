//! Per-aggregate lanes: messages of one aggregate one after another, in
//! stream order; different aggregates in parallel.
//!
//! Every message the subscriber receives goes straight into its
//! aggregate's lane, sorted by stream sequence, whatever else is going on:
//! the fetch loop never stops reading to wait for a handler slot, so a
//! message the server sent is never left unseen (and without progress acks)
//! in the client. What lanes hold is bounded by the consumer's
//! `max_ack_pending`: the server sends no more while that many messages are
//! unacknowledged. A lane has at most one worker; it takes a handler slot
//! (`max_in_flight`) only to run a message, so lanes that wait hold no slot.
//!
//! When a handler fails and its message is nakked for a later delivery, the
//! message is *away*: the lane remembers it, and the messages after it — those
//! already in the lane and those that arrive meanwhile — wait in memory,
//! kept alive with progress acks, until it is back and has been handled.
//! They are not nakked: waiting spends none of their deliveries and adds
//! nothing to JetStream's accounting beyond the message itself being
//! unacknowledged. A failing aggregate therefore takes no handler slot
//! from the others while it waits; its waiting messages count toward the
//! window (`max_ack_pending`) like any other held message.
//!
//! A message away that has not come back within its delay plus the grace
//! ([`Shared::away_grace`](crate::subscriber::setup::shared::Shared::away_grace): the ack wait
//! plus a margin) is *overdue*. What that means depends on who reads the
//! durable ([`Overdue`]): with several readers it went to another process
//! (or left the stream), and the lane goes on without it; with one reader
//! (failover or the reader lease) nobody else can have taken it, so a late
//! redelivery (a consumer leader change resets the server's redelivery
//! timers) is waited for: the lane goes on only once the server says the
//! message is settled or no longer in the stream (see `overdue`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use txoutbox_core::wire;

/// Identifies an aggregate: its type and id.
pub(crate) type LaneKey = Arc<str>;

/// The key of the aggregate `(aggregate_type, aggregate_id)`.
pub(crate) fn lane_key(aggregate_type: &str, aggregate_id: &str) -> LaneKey {
    format!("{aggregate_type}\u{1f}{aggregate_id}").into()
}

/// The lane of a message with these headers: its aggregate's (the
/// `ce-aggregatetype` and `ce-subject` headers, any case); a message that
/// names none (it will be dead-lettered) gets a lane of its own.
pub(crate) fn lane_of(headers: &[(&str, &str)], stream_sequence: u64) -> LaneKey {
    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    };
    match (find(wire::AGGREGATE_TYPE), find(wire::SUBJECT)) {
        (Some(aggregate_type), Some(aggregate_id)) => lane_key(aggregate_type, aggregate_id),
        _ => format!("\u{0}{stream_sequence}").into(),
    }
}

/// A message waiting in, or taken from, a lane.
#[derive(Debug)]
pub(crate) struct Queued<T> {
    /// The message.
    pub(crate) item: T,
    /// Its stream sequence.
    pub(crate) sequence: u64,
    /// Counts it as held until it is dropped (after it is settled).
    #[allow(dead_code, reason = "held for its Drop")]
    pub(crate) held: Option<Held>,
}

/// What to do with a message that arrived.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// It is queued and no worker drives its lane: start one.
    Start,
    /// It is queued; the lane's worker will get to it.
    Queued,
}

/// Where a lane's worker stands.
pub(crate) enum Front {
    /// The first message may run now.
    Ready,
    /// The first message must wait for an earlier one that is away: wait
    /// for `wake` (an arrival) or `until` (that message's grace ends).
    Wait { wake: Arc<Notify>, until: Instant },
    /// Nothing to do; the lane forgot its worker, which ends.
    Done,
}

#[derive(Debug, Clone, Copy)]
struct Away {
    /// When the lane stops waiting for it (with [`Overdue::Ask`]: when it
    /// next asks the server about it).
    expires: Instant,
    /// Past its grace, waiting for the server's word (with [`Overdue::Ask`]).
    overdue: bool,
}

impl Away {
    fn until(expires: Instant) -> Self {
        Self {
            expires,
            overdue: false,
        }
    }
}

/// What a lane does with a message away past its grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overdue {
    /// Several processes read the durable: it went to another one (or left
    /// the stream); the lane goes on without it.
    GoOn,
    /// This process is the durable's one reader: the lane waits until the
    /// server says the message is settled or gone ([`Lanes::overdue`],
    /// [`Lanes::forget`]), asking again every `recheck`.
    Ask { recheck: Duration },
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

    /// Forgets messages away past their grace ([`Overdue::GoOn`]), or
    /// marks them overdue, to be asked about ([`Overdue::Ask`]).
    fn prune(&mut self, now: Instant, overdue: Overdue) {
        self.away.retain(|sequence, away| {
            if away.expires > now {
                return true;
            }
            match overdue {
                Overdue::GoOn => {
                    tracing::warn!(
                        stream_sequence = sequence,
                        "a message nakked for a retry did not come back to this process in time \
                         (another process took it, or it left the stream); \
                         later messages of its aggregate go on without it"
                    );
                    false
                }
                Overdue::Ask { recheck } => {
                    if !away.overdue {
                        tracing::info!(
                            stream_sequence = sequence,
                            "a message nakked for a retry is not back yet; later messages of its \
                             aggregate wait until the server redelivers it, or says it is settled \
                             or gone"
                        );
                    }
                    away.overdue = true;
                    away.expires = now + recheck;
                    true
                }
            }
        });
    }

    /// The first message away, if it is earlier than `sequence`.
    fn earlier_away(&self, sequence: u64) -> Option<Away> {
        self.away
            .first_key_value()
            .filter(|(first, _)| **first < sequence)
            .map(|(_, away)| *away)
    }

    /// Queues `queued` by stream sequence. A second delivery of a message
    /// already queued (redelivered after its ack wait) replaces the first,
    /// so it is handled once and settled through its newest delivery.
    fn queue_sorted(&mut self, queued: Queued<T>) {
        let at = self.queue.partition_point(|q| q.sequence < queued.sequence);
        match self.queue.get_mut(at) {
            Some(same) if same.sequence == queued.sequence => *same = queued,
            _ => self.queue.insert(at, queued),
        }
    }
}

/// Every active lane.
pub(crate) struct Lanes<T> {
    lanes: Arc<Mutex<HashMap<LaneKey, Lane<T>>>>,
    grace: Duration,
    overdue: Overdue,
}

impl<T> Clone for Lanes<T> {
    fn clone(&self) -> Self {
        Self {
            lanes: Arc::clone(&self.lanes),
            grace: self.grace,
            overdue: self.overdue,
        }
    }
}

impl<T> Lanes<T> {
    /// Lanes that wait `grace` past its due time for a message away, then
    /// do what `overdue` says.
    pub(crate) fn new(grace: Duration, overdue: Overdue) -> Self {
        Self {
            lanes: Arc::default(),
            grace,
            overdue,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<LaneKey, Lane<T>>> {
        // No code panics while holding the lock; recover the map regardless.
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a message that arrived for `key`. A message that was away is
    /// back: it is no longer waited for, and, being the earliest, runs next.
    pub(crate) fn admit(&self, key: &LaneKey, queued: Queued<T>) -> Admission {
        let mut lanes = self.lock();
        let lane = lanes.entry(Arc::clone(key)).or_insert_with(Lane::new);
        lane.away.remove(&queued.sequence);
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
    /// comes back, and what follows it in its lane waits for it.
    pub(crate) fn send_away(&self, key: &LaneKey, sequence: u64, delay: Duration) {
        let expires = Instant::now() + delay + self.grace;
        if let Some(lane) = self.lock().get_mut(key) {
            lane.away.insert(sequence, Away::until(expires));
        }
    }

    /// `sequence` of `key` was delivered before this process started and
    /// is not known to be applied: it is away until it comes back (at most
    /// the grace from now), and what follows it in its lane waits for it.
    pub(crate) fn expect(&self, key: &LaneKey, sequence: u64) {
        let expires = Instant::now() + self.grace;
        self.lock()
            .entry(Arc::clone(key))
            .or_insert_with(Lane::new)
            .away
            .insert(sequence, Away::until(expires));
    }

    /// Whether `key`'s first message may run. With `draining`, nothing
    /// waits: every queued message is handed out to be handed back. When the
    /// lane is empty its worker is released (`Done`).
    pub(crate) fn front(&self, key: &LaneKey, draining: bool) -> Front {
        self.front_or_take(key, draining, false).0
    }

    /// Takes `key`'s first message, if it may run (see [`front`](Self::front)).
    pub(crate) fn take(&self, key: &LaneKey, draining: bool) -> Option<Queued<T>> {
        self.front_or_take(key, draining, true).1
    }

    /// [`front`](Self::front), and with `take` the first message if it may
    /// run, under one lock (so nothing that arrives between the check and
    /// the take can be run out of order).
    fn front_or_take(
        &self,
        key: &LaneKey,
        draining: bool,
        take: bool,
    ) -> (Front, Option<Queued<T>>) {
        let now = Instant::now();
        let mut lanes = self.lock();
        let Some(lane) = lanes.get_mut(key) else {
            return (Front::Done, None);
        };
        lane.prune(now, self.overdue);
        let Some(front) = lane.queue.front() else {
            lane.worker = false;
            if lane.away.is_empty() {
                lanes.remove(key);
            }
            return (Front::Done, None);
        };
        match lane.earlier_away(front.sequence) {
            Some(earlier) if !draining => (
                Front::Wait {
                    wake: Arc::clone(&lane.wake),
                    until: earlier.expires,
                },
                None,
            ),
            _ => (
                Front::Ready,
                if take { lane.queue.pop_front() } else { None },
            ),
        }
    }

    /// With the lane's worker (here: the inbox groups) driving it: the run
    /// of `key`'s messages that may run now, in stream order, at most
    /// `most` of them (each must have no earlier message away), and where
    /// the lane stands ([`Front::Ready`] when the run is not empty). When
    /// the lane is empty its worker is released ([`Front::Done`]).
    pub(crate) fn take_run(&self, key: &LaneKey, most: usize) -> (Front, Vec<Queued<T>>) {
        let now = Instant::now();
        let mut lanes = self.lock();
        let Some(lane) = lanes.get_mut(key) else {
            return (Front::Done, Vec::new());
        };
        lane.prune(now, self.overdue);
        let Some(front) = lane.queue.front() else {
            lane.worker = false;
            if lane.away.is_empty() {
                lanes.remove(key);
            }
            return (Front::Done, Vec::new());
        };
        if let Some(earlier) = lane.earlier_away(front.sequence) {
            let wait = Front::Wait {
                wake: Arc::clone(&lane.wake),
                until: earlier.expires,
            };
            return (wait, Vec::new());
        }
        let mut run = Vec::new();
        while run.len() < most
            && let Some(next) = lane.queue.front()
            && lane.earlier_away(next.sequence).is_none()
            && let Some(next) = lane.queue.pop_front()
        {
            run.push(next);
        }
        (Front::Ready, run)
    }

    /// Puts messages taken from `key`'s lane back, in stream order, for
    /// its worker to take again (they were not applied: an earlier message
    /// of theirs failed, or they cannot join a group).
    pub(crate) fn put_back(&self, key: &LaneKey, queued: Queued<T>) {
        let mut lanes = self.lock();
        let lane = lanes.entry(Arc::clone(key)).or_insert_with(Lane::new);
        lane.queue_sorted(queued);
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
        let overdue = self.overdue;
        self.lock().retain(|_, lane| {
            lane.prune(now, overdue);
            lane.worker || !lane.queue.is_empty() || !lane.away.is_empty()
        });
    }

    /// The messages away past their grace that the server is to be asked
    /// about ([`Overdue::Ask`]): at most `most`, the earliest of each lane
    /// (the one its lane waits for), earliest first.
    pub(crate) fn overdue(&self, most: usize) -> Vec<(LaneKey, u64)> {
        if self.overdue == Overdue::GoOn {
            return Vec::new();
        }
        let now = Instant::now();
        let overdue = self.overdue;
        let mut lanes = self.lock();
        let mut found = Vec::new();
        for (key, lane) in lanes.iter_mut() {
            lane.prune(now, overdue);
            if let Some((sequence, away)) = lane.away.first_key_value()
                && away.overdue
            {
                found.push((Arc::clone(key), *sequence));
            }
        }
        found.sort_unstable_by_key(|(_, sequence)| *sequence);
        found.truncate(most);
        found
    }

    /// The server says `sequence` of `key` is settled or no longer in the
    /// stream: its lane stops waiting for it.
    pub(crate) fn forget(&self, key: &LaneKey, sequence: u64) {
        if let Some(lane) = self.lock().get_mut(key)
            && lane.away.remove(&sequence).is_some()
        {
            lane.wake.notify_one();
        }
    }

    /// Applies `f` to every message waiting in any lane.
    pub(crate) fn waiting<R>(&self, f: impl Fn(&T) -> R) -> Vec<R> {
        self.lock()
            .values()
            .flat_map(|lane| lane.queue.iter().map(|q| f(&q.item)))
            .collect()
    }

    /// How many lanes exist.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// One message held by the subscriber, counted in `Shared::held` from the
/// moment it is received until it is settled (the guard is dropped).
#[derive(Debug)]
pub(crate) struct Held(Arc<AtomicUsize>);

impl Held {
    /// Counts one more message held.
    pub(crate) fn new(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(counter))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
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
            held: None,
        }
    }

    fn run(lanes: &Lanes<u64>, key: &LaneKey) -> u64 {
        match lanes.take(key, false) {
            Some(q) => q.item,
            None => panic!("nothing may run"),
        }
    }

    fn waits(lanes: &Lanes<u64>, key: &LaneKey) -> bool {
        matches!(lanes.front(key, false), Front::Wait { .. })
    }

    #[tokio::test]
    async fn one_worker_per_aggregate_in_stream_order() {
        let lanes = Lanes::new(GRACE, Overdue::GoOn);
        let (a, b) = (lane_key("order", "1"), lane_key("order", "2"));
        assert_eq!(lanes.admit(&a, q(1)), Admission::Start);
        assert_eq!(lanes.admit(&b, q(2)), Admission::Start);
        assert_eq!(lanes.admit(&a, q(4)), Admission::Queued);
        assert_eq!(lanes.admit(&a, q(3)), Admission::Queued);
        assert_eq!(run(&lanes, &a), 1);
        assert_eq!(run(&lanes, &a), 3, "sorted by stream sequence");
        assert_eq!(run(&lanes, &a), 4);
        assert!(matches!(lanes.front(&a, false), Front::Done));
        assert_eq!(run(&lanes, &b), 2);
        assert!(matches!(lanes.front(&b, false), Front::Done));
        assert_eq!(lanes.len(), 0);
        assert_eq!(lanes.admit(&a, q(5)), Admission::Start);
    }

    #[tokio::test]
    async fn a_redelivered_copy_replaces_the_queued_one() {
        let lanes = Lanes::new(GRACE, Overdue::GoOn);
        let a = lane_key("order", "1");
        let _ = lanes.admit(&a, q(1));
        let _ = lanes.admit(&a, q(1));
        assert_eq!(lanes.waiting(|item| *item), [1]);
    }

    #[tokio::test(start_paused = true)]
    async fn what_follows_a_failed_message_waits_for_it_in_order() {
        let lanes = Lanes::new(GRACE, Overdue::GoOn);
        let a = lane_key("order", "1");
        assert_eq!(lanes.admit(&a, q(1)), Admission::Start);
        assert_eq!(lanes.admit(&a, q(2)), Admission::Queued);
        assert_eq!(run(&lanes, &a), 1);
        // 1 fails, nakked for 1 s: 2 waits, and so does 3, arriving meanwhile.
        lanes.send_away(&a, 1, Duration::from_secs(1));
        assert!(waits(&lanes, &a));
        assert_eq!(lanes.admit(&a, q(3)), Admission::Queued);
        assert!(waits(&lanes, &a));
        assert!(lanes.take(&a, false).is_none());
        assert_eq!(lanes.waiting(|item| *item), [2, 3], "held, not handed back");
        // 1 is back, late but within its grace: it runs first, then 2, 3.
        tokio::time::advance(Duration::from_secs(1) + GRACE / 2).await;
        assert_eq!(lanes.admit(&a, q(1)), Admission::Queued);
        assert_eq!(run(&lanes, &a), 1);
        assert_eq!(run(&lanes, &a), 2);
        assert_eq!(run(&lanes, &a), 3);
        assert!(matches!(lanes.front(&a, false), Front::Done));
        assert_eq!(lanes.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn what_follows_a_message_outstanding_from_before_a_restart_waits_for_it() {
        let lanes = Lanes::new(GRACE, Overdue::GoOn);
        let a = lane_key("order", "1");
        // Delivered to a process that died: expected back.
        lanes.expect(&a, 4);
        assert_eq!(lanes.admit(&a, q(7)), Admission::Start);
        assert!(waits(&lanes, &a), "7 waits for 4");
        assert_eq!(lanes.admit(&a, q(4)), Admission::Queued);
        assert_eq!(run(&lanes, &a), 4);
        assert_eq!(run(&lanes, &a), 7);
        // Never back: given up after the grace.
        lanes.expect(&a, 9);
        assert_eq!(lanes.admit(&a, q(10)), Admission::Queued);
        assert!(waits(&lanes, &a));
        tokio::time::advance(GRACE + Duration::from_millis(1)).await;
        assert_eq!(run(&lanes, &a), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_that_never_comes_back_is_given_up_after_its_grace() {
        let lanes = Lanes::new(GRACE, Overdue::GoOn);
        let a = lane_key("order", "1");
        let _ = lanes.admit(&a, q(1));
        assert_eq!(run(&lanes, &a), 1);
        lanes.send_away(&a, 1, Duration::from_secs(1));
        let _ = lanes.admit(&a, q(2));
        match lanes.front(&a, false) {
            Front::Wait { until, .. } => {
                assert_eq!(until, Instant::now() + Duration::from_secs(1) + GRACE);
            }
            _ => panic!("2 waits for 1"),
        }
        tokio::time::advance(Duration::from_secs(1) + GRACE).await;
        assert_eq!(run(&lanes, &a), 2);
        assert!(matches!(lanes.front(&a, false), Front::Done));
        lanes.sweep();
        assert_eq!(lanes.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn one_reader_waits_past_the_grace_until_the_server_settles_it() {
        let recheck = Duration::from_secs(1);
        let lanes = Lanes::new(GRACE, Overdue::Ask { recheck });
        let (a, b) = (lane_key("order", "1"), lane_key("order", "2"));
        let _ = lanes.admit(&a, q(1));
        assert_eq!(run(&lanes, &a), 1);
        lanes.send_away(&a, 1, Duration::from_secs(1));
        let _ = lanes.admit(&a, q(2));
        lanes.expect(&b, 3);
        let _ = lanes.admit(&b, q(4));
        assert!(lanes.overdue(10).is_empty(), "within their grace");
        // Long past the grace (a leader change delays the redelivery):
        // both still wait, overdue, and are asked about again every recheck.
        tokio::time::advance(Duration::from_secs(1) + GRACE * 10).await;
        assert!(waits(&lanes, &a) && waits(&lanes, &b));
        lanes.sweep();
        assert_eq!(lanes.len(), 2, "a sweep forgets nothing overdue");
        assert_eq!(lanes.overdue(10), [(a.clone(), 1), (b.clone(), 3)]);
        assert_eq!(lanes.overdue(1), [(a.clone(), 1)], "the earliest first");
        match lanes.front(&a, false) {
            Front::Wait { until, .. } => assert!(until <= Instant::now() + recheck),
            _ => panic!("2 waits for 1"),
        }
        // 1 comes back at last: it runs first.
        let _ = lanes.admit(&a, q(1));
        assert_eq!(run(&lanes, &a), 1);
        assert_eq!(run(&lanes, &a), 2);
        // The server says 3 is settled (or gone): 4 goes on.
        lanes.forget(&b, 3);
        assert!(lanes.overdue(10).is_empty());
        assert_eq!(run(&lanes, &b), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn several_readers_list_nothing_overdue() {
        let lanes = Lanes::new(GRACE, Overdue::GoOn);
        let a = lane_key("order", "1");
        lanes.expect(&a, 3);
        let _ = lanes.admit(&a, q(4));
        tokio::time::advance(GRACE * 2).await;
        assert!(lanes.overdue(10).is_empty());
        assert_eq!(run(&lanes, &a), 4, "given up after its grace");
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_stops_at_a_message_behind_one_away() {
        let lanes = Lanes::new(GRACE, Overdue::GoOn);
        let a = lane_key("order", "1");
        lanes.expect(&a, 6);
        for sequence in [5, 4, 8, 7] {
            let _ = lanes.admit(&a, q(sequence));
        }
        let (front, run) = lanes.take_run(&a, 10);
        assert!(matches!(front, Front::Ready));
        let taken: Vec<u64> = run.iter().map(|q| q.item).collect();
        assert_eq!(taken, [4, 5], "7 and 8 wait for 6");
        assert!(matches!(lanes.take_run(&a, 10).0, Front::Wait { .. }));
        // 5 failed after all: back in the lane, first again once 6 is in.
        lanes.put_back(&a, q(5));
        let _ = lanes.admit(&a, q(6));
        let (_, run) = lanes.take_run(&a, 2);
        assert_eq!(
            run.iter().map(|q| q.item).collect::<Vec<_>>(),
            [5, 6],
            "at most 2"
        );
        let (_, run) = lanes.take_run(&a, 10);
        assert_eq!(run.iter().map(|q| q.item).collect::<Vec<_>>(), [7, 8]);
        assert!(matches!(lanes.take_run(&a, 10).0, Front::Done));
        assert_eq!(lanes.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn draining_hands_out_everything() {
        let lanes = Lanes::new(GRACE, Overdue::GoOn);
        let a = lane_key("order", "1");
        let _ = lanes.admit(&a, q(1));
        assert_eq!(run(&lanes, &a), 1);
        lanes.send_away(&a, 1, Duration::from_secs(1));
        let _ = lanes.admit(&a, q(2));
        assert!(lanes.take(&a, false).is_none());
        assert_eq!(lanes.take(&a, true).map(|q| q.item), Some(2));
    }
}
