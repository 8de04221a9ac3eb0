//! What the soak watches every 100 ms while it runs: events written, the
//! outbox's backlog and effects applied (none while the database is down),
//! messages in the stream (none while the broker is down); and, from those
//! samples, how long after each fault publishing and consuming went on.

use std::time::{Duration, Instant, SystemTime};

use async_nats::jetstream;
use sea_orm::DatabaseConnection;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::harness::error::BoxError;
use crate::harness::pgstats;
use crate::harness::stats::ms;
use crate::parts::soak::faults::FaultKind;

const EVERY: Duration = Duration::from_millis(100);
/// A stream-info request while the broker is down gives up after this; so
/// does the count of rows while the database is.
const INFO_TIMEOUT: Duration = Duration::from_millis(300);

/// One sample.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sample {
    /// Since the writers started.
    pub(crate) at: Duration,
    /// Rows in the outbox.
    pub(crate) events: u64,
    /// Rows not yet published.
    pub(crate) pending: u64,
    /// Messages in the stream, when the broker answered.
    pub(crate) stored: Option<u64>,
    /// Rows of `effects`.
    pub(crate) effects: u64,
    /// Whether the database answered; if not, `events`, `pending` and
    /// `effects` are the last sample's.
    pub(crate) db: bool,
}

/// The sampling task: the latest sample on a watch channel, every sample
/// when stopped.
#[derive(Debug)]
pub(crate) struct Sampler {
    latest: watch::Receiver<Sample>,
    task: JoinHandle<Result<Vec<Sample>, BoxError>>,
    stop: watch::Sender<bool>,
}

impl Sampler {
    /// Samples `db` and `stream` every 100 ms from `started`.
    pub(crate) fn start(
        db: DatabaseConnection,
        jetstream: jetstream::Context,
        stream: String,
        started: Instant,
    ) -> Self {
        let (tx, latest) = watch::channel(Sample::default());
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut ticks = tokio::time::interval(EVERY);
            let mut last = Sample::default();
            while !*stopped.borrow() {
                tokio::select! {
                    _ = ticks.tick() => {}
                    _ = stopped.changed() => break,
                }
                let sample = measure(&db, &jetstream, &stream, started, &last).await;
                last = sample;
                tx.send_replace(sample);
                samples.push(sample);
            }
            Ok(samples)
        });
        Self { latest, task, stop }
    }

    /// The latest sample.
    pub(crate) fn latest(&self) -> Sample {
        *self.latest.borrow()
    }

    /// Waits until a sample has `events` or more, or `deadline`.
    pub(crate) async fn until_events(&mut self, events: u64, deadline: Instant) -> bool {
        let wait = self.latest.wait_for(|s| s.events >= events);
        matches!(
            tokio::time::timeout_at(deadline.into(), wait).await,
            Ok(Ok(_))
        )
    }

    /// Waits until a sample taken after `after` (since the start) shows the
    /// outbox drained and as many effects as events. Gives up after
    /// `limit`, or once nothing moved for `stall`, saying where it stood.
    pub(crate) async fn until_caught_up(
        &mut self,
        after: Duration,
        limit: Duration,
        stall: Duration,
    ) -> Result<(), String> {
        let (began, mut moved) = (Instant::now(), Instant::now());
        let mut seen = self.latest();
        loop {
            let now = self.latest();
            if now.db && now.at > after && now.pending == 0 && now.effects >= now.events {
                return Ok(());
            }
            if (now.pending, now.effects, now.stored) != (seen.pending, seen.effects, seen.stored) {
                (seen, moved) = (now, Instant::now());
            }
            if began.elapsed() > limit || moved.elapsed() > stall {
                return Err(format!(
                    "{} pending, {} of {} events applied, {} after the writers finished \
                     (nothing moved for {})",
                    now.pending,
                    now.effects,
                    now.events,
                    ms(began.elapsed()),
                    ms(moved.elapsed())
                ));
            }
            tokio::time::sleep(EVERY).await;
        }
    }

    /// Stops sampling and returns every sample.
    pub(crate) async fn stop(self) -> Result<Vec<Sample>, BoxError> {
        self.stop.send_replace(true);
        self.task.await?
    }
}

/// One sample; the database's figures are `last`'s if it does not answer.
async fn measure(
    db: &DatabaseConnection,
    jetstream: &jetstream::Context,
    stream: &str,
    started: Instant,
    last: &Sample,
) -> Sample {
    let at = started.elapsed();
    let counts = tokio::time::timeout(INFO_TIMEOUT, count_rows(db))
        .await
        .ok()
        .and_then(Result::ok);
    let stored = tokio::time::timeout(INFO_TIMEOUT, async {
        let mut handle = jetstream.get_stream(stream).await.ok()?;
        handle.info().await.ok().map(|info| info.state.messages)
    })
    .await
    .ok()
    .flatten();
    let (events, pending, effects) = counts.unwrap_or((last.events, last.pending, last.effects));
    Sample {
        at,
        events,
        pending,
        stored,
        effects,
        db: counts.is_some(),
    }
}

/// Rows, rows not yet published, effects.
async fn count_rows(db: &DatabaseConnection) -> Result<(u64, u64, u64), BoxError> {
    let counts = pgstats::scalar::<String>(
        db,
        "SELECT concat_ws(' ', count(*), count(*) FILTER (WHERE status = 0), \
         (SELECT count(*) FROM effects)) AS n FROM outbox_messages",
        "n",
    )
    .await?;
    let mut numbers = counts.split(' ').map(str::parse::<u64>);
    let mut next = || -> Result<u64, BoxError> { Ok(numbers.next().ok_or("a short sample")??) };
    Ok((next()?, next()?, next()?))
}

/// A fault as it happened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hit {
    /// What was killed.
    pub(crate) kind: FaultKind,
    /// When (since the writers started).
    pub(crate) at: Duration,
    /// When it was running again.
    pub(crate) back: Duration,
    /// `at` and `back` by the wall clock (the database's, on this machine).
    pub(crate) wall: (SystemTime, SystemTime),
}

/// What the samples say about one fault.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recovery {
    /// From `back` to the first sample with more messages stored than the
    /// first sample from `back` on.
    pub(crate) publishing: Option<Duration>,
    /// The same for effects.
    pub(crate) consuming: Option<Duration>,
    /// From `back` until the backlog, past its peak after the fault, was
    /// no larger than before the fault (the largest in the 2 s before it,
    /// at least 20 rows).
    pub(crate) published_up: Option<Duration>,
    /// The same for events not yet applied.
    pub(crate) applied_up: Option<Duration>,
    /// The largest backlog from the fault until the next one.
    pub(crate) peak_backlog: u64,
}

/// Before a fault, the steady level is the largest in this long.
const STEADY_BEFORE: Duration = Duration::from_secs(2);
/// A level this low counts as steady anyway.
const STEADY_FLOOR: u64 = 20;

/// How `hit` went, from `samples`; `until` is when the next fault hit.
pub(crate) fn recovery(samples: &[Sample], hit: &Hit, until: Duration) -> Recovery {
    let after: Vec<&Sample> = samples.iter().filter(|s| s.at >= hit.back).collect();
    // The database's figures only where it answered.
    let after_known: Vec<&Sample> = after.iter().copied().filter(|s| s.db).collect();
    let resumed = |value: fn(&Sample) -> Option<u64>| {
        let mut known = after.iter().filter_map(|s| value(s).map(|v| (s.at, v)));
        let (_, base) = known.next()?;
        known
            .find(|(_, v)| *v > base)
            .map(|(at, _)| at.saturating_sub(hit.back))
    };
    let caught_up = |behind: fn(&Sample) -> u64| {
        let steady = samples
            .iter()
            .filter(|s| s.db && s.at < hit.at && s.at + STEADY_BEFORE >= hit.at)
            .map(behind)
            .max()
            .unwrap_or(0)
            .max(STEADY_FLOOR);
        // From the peak on: a database outage stops the writers too, so
        // the backlog is low at the return and grows only after it.
        let peak = after_known
            .iter()
            .filter(|s| s.at < until)
            .max_by_key(|s| (behind(s), std::cmp::Reverse(s.at)))
            .map_or(hit.back, |s| s.at);
        after_known
            .iter()
            .filter(|s| s.at >= peak)
            .find(|s| behind(s) <= steady)
            .map(|s| s.at.saturating_sub(hit.back))
    };
    Recovery {
        publishing: resumed(|s| s.stored),
        consuming: resumed(|s| s.db.then_some(s.effects)),
        published_up: caught_up(|s| s.pending),
        applied_up: caught_up(|s| s.events.saturating_sub(s.effects)),
        peak_backlog: samples
            .iter()
            .filter(|s| s.db && s.at >= hit.at && s.at < until)
            .map(|s| s.pending)
            .max()
            .unwrap_or(0),
    }
}
