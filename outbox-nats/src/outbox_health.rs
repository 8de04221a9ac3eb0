//! [`OutboxHealth`]: the outbox's own state in a service (the broker
//! connection, the processor's progress, each subscriber's lag and holds),
//! as `txoutbox-axum`'s `/health/outbox` serves it and `txoutbox-console`'s
//! health page shows it. It lives here, the lowest crate that knows every
//! part it reports (the core's processor [`Health`], this crate's
//! [`SubscriberHealth`] and NATS connection), so the runtime and the
//! console share it without depending on each other.

use async_nats::connection::State;
use txoutbox_core::processor::Health;

use crate::subscriber::SubscriberHealth;

/// The state of the runtime's connection to NATS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BrokerConnection {
    /// Connected.
    Connected,
    /// Never connected yet: a client that retries its first connection in
    /// the background while the broker is away.
    Connecting,
    /// Connected once, lost, reconnecting.
    Disconnected,
}

impl BrokerConnection {
    /// `"connected"`, `"connecting"` or `"disconnected"`: the JSON's words.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connected => "connected",
            Self::Connecting => "connecting",
            Self::Disconnected => "disconnected",
        }
    }

    /// The worst of several clients' states: disconnected, then
    /// connecting, then connected; `None` without a client.
    pub fn worst(states: impl IntoIterator<Item = State>) -> Option<Self> {
        states.into_iter().map(Self::from).max()
    }
}

impl From<State> for BrokerConnection {
    fn from(state: State) -> Self {
        match state {
            State::Connected => Self::Connected,
            State::Pending => Self::Connecting,
            State::Disconnected => Self::Disconnected,
        }
    }
}

impl std::fmt::Display for BrokerConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outbox's own state: what `txoutbox-axum`'s `/health/outbox` answers
/// (from `RuntimeHealth::outbox`) and the web console's health page shows
/// (through its `HealthSource`). It does not decide whether the process
/// takes requests (that is the runtime's `Readiness`); it is for an
/// operator, a monitor, and the alerts beside the metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxHealth {
    /// Nothing is degraded.
    pub ok: bool,
    /// The connection to NATS, the worst of the runtime's clients (its
    /// subscribers' and the one given to the runtime builder's
    /// `nats_connection`); `None` when the runtime knows no client.
    pub broker: Option<BrokerConnection>,
    /// The processor's health, if the runtime has one.
    pub processor: Option<Health>,
    /// Each subscriber's health, in the order they were added.
    pub subscribers: Vec<SubscriberHealth>,
    /// What keeps the runtime's streams (the runtime builder's `stream`)
    /// from being used, one line each (`RuntimeHealth::stream_problems`).
    pub streams: Vec<String>,
    /// The degraded parts, by name: `"streams"`, `"broker"`, `"processor"`,
    /// `"subscriber <durable>"`.
    pub degraded: Vec<String>,
    /// What is wrong, one line each.
    pub problems: Vec<String>,
}

impl OutboxHealth {
    /// Judges the parts: the broker when not connected; the processor when
    /// not healthy (against the thresholds); a subscriber when not ready,
    /// paused (its inbox's database away), or holding aggregates behind a
    /// dead message; `streams` (what keeps the service's streams from being
    /// used, one line each) when there are any.
    ///
    /// ```
    /// use txoutbox_nats::{BrokerConnection, OutboxHealth};
    ///
    /// let health = OutboxHealth::judge(Some(BrokerConnection::Connected), None, Vec::new(), Vec::new());
    /// assert!(health.ok && health.problems.is_empty());
    /// ```
    pub fn judge(
        broker: Option<BrokerConnection>,
        processor: Option<Health>,
        subscribers: Vec<SubscriberHealth>,
        streams: Vec<String>,
    ) -> Self {
        let mut degraded = Vec::new();
        let mut problems = Vec::new();
        if !streams.is_empty() {
            degraded.push("streams".to_owned());
            problems.extend(streams.iter().cloned());
        }
        if let Some(connection) = broker
            && connection != BrokerConnection::Connected
        {
            degraded.push("broker".to_owned());
            problems.push(format!("the NATS connection is {connection}"));
        }
        if let Some(processor) = &processor
            && !processor.healthy
        {
            degraded.push("processor".to_owned());
            problems.extend(processor.problems.iter().cloned());
        }
        for subscriber in &subscribers {
            let mut own = subscriber.problems.clone();
            if let Some(paused) = &subscriber.paused {
                own.push(format!("subscriber {} is {paused}", subscriber.durable));
            }
            if let Some(held) = subscriber.held_aggregates.filter(|held| *held > 0) {
                own.push(format!(
                    "subscriber {} holds {held} aggregate(s) behind a dead message",
                    subscriber.durable
                ));
            }
            if !own.is_empty() {
                degraded.push(format!("subscriber {}", subscriber.durable));
                problems.extend(own);
            }
        }
        Self {
            ok: degraded.is_empty(),
            broker,
            processor,
            subscribers,
            streams,
            degraded,
            problems,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_connection_wins() {
        assert_eq!(BrokerConnection::worst([]), None);
        assert_eq!(
            BrokerConnection::worst([State::Connected, State::Pending]),
            Some(BrokerConnection::Connecting)
        );
        assert_eq!(
            BrokerConnection::worst([State::Pending, State::Disconnected, State::Connected]),
            Some(BrokerConnection::Disconnected)
        );
    }

    #[test]
    fn a_broker_away_is_degraded() {
        let health = OutboxHealth::judge(
            Some(BrokerConnection::Disconnected),
            None,
            Vec::new(),
            Vec::new(),
        );
        assert!(!health.ok);
        assert_eq!(health.degraded, ["broker"]);
        assert_eq!(health.problems, ["the NATS connection is disconnected"]);
        let health = OutboxHealth::judge(
            Some(BrokerConnection::Connected),
            None,
            Vec::new(),
            Vec::new(),
        );
        assert!(health.ok, "{health:?}");
    }

    #[test]
    fn a_stream_not_ensured_is_degraded() {
        let problem = "stream SHOP is not ensured yet: the broker has not answered".to_owned();
        let health = OutboxHealth::judge(
            Some(BrokerConnection::Connected),
            None,
            Vec::new(),
            vec![problem.clone()],
        );
        assert!(!health.ok);
        assert_eq!(health.degraded, ["streams"]);
        assert_eq!(health.problems, [problem]);
    }
}
