//! The processor's settings, every one with a default that suits most users.

use std::time::Duration;

use crate::store::RetryPolicy;

/// The longest lease a processor takes. Past it a lease makes no sense (a
/// dead processor's messages wait it out, and no broker's duplicate window
/// covers it); far past it, the deadlines computed from it overflow.
const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// The default lease: short, so a processor that dies (or is paused)
/// holding messages holds up their aggregates for seconds, not minutes; it
/// costs nothing while idle (only batches in flight renew their lease) and
/// one renewal statement per batch still publishing after a third of it.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(3);

/// A publish starts only while this fraction (1 / `LEASE_MARGIN_DIVISOR`)
/// of the lease is left, so its ack comes back before the lease ends.
pub(crate) const LEASE_MARGIN_DIVISOR: u32 = 5;

/// What [`ProcessorBuilder::build`](super::ProcessorBuilder::build) refuses: a
/// setting that cannot work. (Each builder of the workspace fails with its
/// own build error; the subscriber's is `txoutbox_nats::subscriber::SubscriberBuildError`.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid processor setting `{setting}`: {reason}")]
#[non_exhaustive]
pub struct ProcessorBuildError {
    /// The setting's name.
    pub setting: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

/// How a [`Processor`](super::Processor) claims, publishes and retries.
///
/// | setting | default | meaning |
/// |---|---|---|
/// | `batch_size` | 1,000 | messages per claim (one claim and one completion statement per batch) |
/// | `batches_in_flight` | 3 | claimed batches being published at once: claiming, publishing and completing overlap |
/// | `max_in_flight` | 4,096 | publishes awaiting their ack at once, over all batches |
/// | `lease` | 3 s | how long a claim is held (1 s to 24 h, at least 5 x the publisher's ack timeout); renewed every third of it while a batch is in flight, so a dead processor's messages are claimed again within about `lease` + `poll_interval` |
/// | `gather` | 2 ms | while a batch is publishing, how long just-committed messages may wait for more to join them in one claim (none wait while nothing is in flight) |
/// | `poll_interval` | 1 s | fallback claim when no wake-up came; idle cost: one cheap query per interval |
/// | `retry` | [`RetryPolicy::default`] | attempts and backoff for messages the broker rejected |
/// | `unavailable_backoff` | 100 ms … 5 s | global pause, doubling, while the broker is unavailable; back to the first step at a reconnect |
/// | `shutdown_timeout` | 10 s | how long shutdown waits for acks in flight |
/// | `stats_interval` | 15 s | how often the pending/dead/oldest-age gauges are refreshed (`None`: never) |
///
/// With the `serde` feature it loads from a configuration file, every
/// setting optional (a missing one keeps its default), durations in
/// humantime form; [`ProcessorBuilder::config`](super::ProcessorBuilder::config)
/// takes it and `build` validates it:
///
#[cfg_attr(feature = "serde", doc = "```")]
#[cfg_attr(not(feature = "serde"), doc = "```ignore")]
/// use txoutbox_core::processor::ProcessorConfig;
///
/// let config: ProcessorConfig = serde_json::from_str(r#"{
///     "batch_size": 500,
///     "lease": "5s",
///     "poll_interval": "250ms",
///     "retry": { "max_attempts": 20, "max_backoff": "10m" },
///     "unavailable_backoff": { "first": "50ms", "max": "2s" }
/// }"#)?;
/// assert_eq!(config.lease(), std::time::Duration::from_secs(5));
/// assert_eq!(config.retry().max_attempts, 20);
/// assert_eq!(config.batches_in_flight(), 3); // the default
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
pub struct ProcessorConfig {
    pub(crate) batch_size: u32,
    pub(crate) batches_in_flight: usize,
    pub(crate) max_in_flight: usize,
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub(crate) lease: Duration,
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub(crate) gather: Duration,
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub(crate) poll_interval: Duration,
    pub(crate) retry: RetryPolicy,
    #[cfg_attr(feature = "serde", serde(with = "pause_range"))]
    pub(crate) unavailable_backoff: (Duration, Duration),
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub(crate) shutdown_timeout: Duration,
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub(crate) stats_interval: Option<Duration>,
}

/// `unavailable_backoff` as `{ "first": "100ms", "max": "5s" }`.
#[cfg(feature = "serde")]
mod pause_range {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Range {
        #[serde(with = "humantime_serde")]
        first: Duration,
        #[serde(with = "humantime_serde")]
        max: Duration,
    }

    pub(super) fn serialize<S: Serializer>(
        range: &(Duration, Duration),
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        Range {
            first: range.0,
            max: range.1,
        }
        .serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<(Duration, Duration), D::Error> {
        let range = Range::deserialize(deserializer)?;
        Ok((range.first, range.max))
    }
}

impl Default for ProcessorConfig {
    fn default() -> Self {
        Self {
            batch_size: 1000,
            batches_in_flight: 3,
            max_in_flight: 4096,
            lease: DEFAULT_LEASE,
            gather: Duration::from_millis(2),
            poll_interval: Duration::from_secs(1),
            retry: RetryPolicy::default(),
            unavailable_backoff: (Duration::from_millis(100), Duration::from_secs(5)),
            shutdown_timeout: Duration::from_secs(10),
            stats_interval: Some(Duration::from_secs(15)),
        }
    }
}

impl ProcessorConfig {
    /// Messages per claim (default 1,000).
    pub fn batch_size(&self) -> u32 {
        self.batch_size
    }

    /// Claimed batches published at once (default 3).
    pub fn batches_in_flight(&self) -> usize {
        self.batches_in_flight
    }

    /// Publishes awaiting their ack at once (default 4,096).
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// The lease on a claimed batch (default [`DEFAULT_LEASE`], 3 s). A
    /// broker's deduplication window must be longer, so a batch re-published
    /// after a crashed processor's lease ran out is still recognised.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// How long just-committed messages may wait for more while a batch is
    /// publishing (default 2 ms).
    pub fn gather(&self) -> Duration {
        self.gather
    }

    /// The fallback poll interval (default 1 s).
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// The retry policy for rejected messages.
    pub fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    /// The shutdown deadline (default 10 s).
    pub fn shutdown_timeout(&self) -> Duration {
        self.shutdown_timeout
    }

    /// Checks the settings together, and the lease against the publisher's
    /// ack timeout (see [`Publisher::ack_timeout`](crate::Publisher::ack_timeout)).
    pub(crate) fn validate(
        &self,
        ack_timeout: Option<Duration>,
    ) -> Result<(), ProcessorBuildError> {
        let bad = |setting, reason: &str| {
            Err(ProcessorBuildError {
                setting,
                reason: reason.to_owned(),
            })
        };
        if self.batch_size == 0 {
            return bad("batch_size", "must be at least 1");
        }
        if self.batches_in_flight == 0 {
            return bad("batches_in_flight", "must be at least 1");
        }
        if self.max_in_flight == 0 {
            return bad("max_in_flight", "must be at least 1");
        }
        if self.lease < Duration::from_secs(1) {
            return bad(
                "lease",
                "must be at least 1 s (it is renewed every third of it)",
            );
        }
        if self.lease > MAX_LEASE {
            return bad(
                "lease",
                "must be at most 24 h (a dead processor's messages wait out its lease, \
                 and the broker's duplicate window must outlast it)",
            );
        }
        if let Some(ack_timeout) = ack_timeout
            && self.lease < ack_timeout.saturating_mul(LEASE_MARGIN_DIVISOR)
        {
            return Err(ProcessorBuildError {
                setting: "lease",
                reason: format!(
                    "{:?} is shorter than {LEASE_MARGIN_DIVISOR} x the publisher's ack timeout \
                     ({ack_timeout:?}): a publish starts only while a fifth of the lease is \
                     left, and its ack must come back before the lease ends (lengthen the \
                     lease or shorten the publisher's ack timeout)",
                    self.lease
                ),
            });
        }
        if self.poll_interval.is_zero() {
            return bad("poll_interval", "must be longer than zero");
        }
        if self.retry.max_attempts == 0 {
            return bad("retry.max_attempts", "must be at least 1");
        }
        if self.retry.initial_backoff > self.retry.max_backoff {
            return bad("retry", "initial_backoff must not exceed max_backoff");
        }
        let (first, max) = self.unavailable_backoff;
        if first.is_zero() || first > max {
            return bad(
                "unavailable_backoff",
                "the first pause must be longer than zero and not exceed the longest",
            );
        }
        if self.stats_interval.is_some_and(|i| i.is_zero()) {
            return bad("stats_interval", "must be longer than zero (or None)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_lease(lease: Duration) -> ProcessorConfig {
        ProcessorConfig {
            lease,
            ..ProcessorConfig::default()
        }
    }

    #[test]
    fn the_defaults_are_valid() {
        assert_eq!(ProcessorConfig::default().validate(None), Ok(()));
    }

    #[test]
    fn a_lease_must_be_between_a_second_and_a_day() {
        for bad in [
            Duration::from_millis(999),
            MAX_LEASE + Duration::from_secs(1),
            Duration::MAX,
        ] {
            let err = with_lease(bad).validate(None).expect_err("out of bounds");
            assert_eq!(err.setting, "lease", "{bad:?}");
        }
        for good in [Duration::from_secs(1), MAX_LEASE] {
            assert_eq!(with_lease(good).validate(None), Ok(()), "{good:?}");
        }
    }

    #[test]
    fn a_lease_must_outlast_five_ack_timeouts() {
        let ack = Duration::from_millis(600);
        assert_eq!(ProcessorConfig::default().validate(Some(ack)), Ok(()));
        let err = with_lease(Duration::from_millis(2_999))
            .validate(Some(ack))
            .expect_err("shorter than 5 ack timeouts");
        assert_eq!(err.setting, "lease");
        assert!(err.reason.contains("ack timeout"), "{}", err.reason);
        assert_eq!(
            with_lease(Duration::from_secs(2)).validate(Some(Duration::from_millis(400))),
            Ok(())
        );
    }
}
