//! How failed messages are retried: [`RetryPolicy`].

use std::time::Duration;

/// How failed messages are retried. With the `serde` feature it loads from
/// a configuration file (durations in humantime form, missing fields keep
/// their defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts after which a retryable failure goes to `dead` (default 10).
    pub max_attempts: u32,
    /// Backoff after the first failure (default 1 s); doubles with each
    /// attempt up to `max_backoff`. Stores apply "equal jitter": half of the
    /// delay is fixed, half random, so retries of many messages spread out.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub initial_backoff: Duration,
    /// Longest backoff (default 5 min).
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub max_backoff: Duration,
}

impl RetryPolicy {
    /// A policy of `max_attempts`, backing off from `initial_backoff`
    /// (doubling) up to `max_backoff`.
    pub fn new(max_attempts: u32, initial_backoff: Duration, max_backoff: Duration) -> Self {
        Self {
            max_attempts,
            initial_backoff,
            max_backoff,
        }
    }

    /// The same with `max_attempts`.
    #[must_use]
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// The same with `initial_backoff`.
    #[must_use]
    pub fn with_initial_backoff(mut self, initial_backoff: Duration) -> Self {
        self.initial_backoff = initial_backoff;
        self
    }

    /// The same with `max_backoff`.
    #[must_use]
    pub fn with_max_backoff(mut self, max_backoff: Duration) -> Self {
        self.max_backoff = max_backoff;
        self
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 10,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
        }
    }
}
