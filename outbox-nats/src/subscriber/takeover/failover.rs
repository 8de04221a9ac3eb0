//! Failover (see [`SubscriberBuilder::failover`](crate::subscriber::SubscriberBuilder::failover)):
//! the durable has a priority group with a pinned client (nats-server 2.11+,
//! ADR-42), so any number of processes may run the subscriber and only the
//! pinned one receives. This module holds what the mode adds: the server
//! check at build, the consumer's priority settings, the pull timing that
//! keeps the pin, and the tracking of the pin in the fetch loop.

use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::consumer::{PriorityPolicy, pull};

use crate::server_version::major_minor;
use crate::subscriber::config::SubscriberBuildError;

/// The durable's one priority group.
pub(crate) const GROUP: &str = "failover";

/// How long the pinned process may go without pulling before the server
/// pins another, by default: a crashed pinned process is replaced after
/// about this long.
pub(crate) const DEFAULT_PINNED_TTL: Duration = Duration::from_secs(4);

/// The shortest pin timeout accepted: the pinned process pulls every fifth
/// of it, and pulls of less than 200 ms would mostly be overhead.
pub(crate) const MIN_PINNED_TTL: Duration = Duration::from_secs(1);

/// The first nats-server release with pinned-client priority groups.
const FIRST_SERVER: (u64, u64) = (2, 11);

/// Sets the pinned-client priority group on `config`.
pub(crate) fn configure(config: &mut pull::Config, pinned_ttl: Duration) {
    config.priority_policy = PriorityPolicy::PinnedClient;
    config.priority_groups = vec![GROUP.to_owned()];
    config.priority_timeout = pinned_ttl;
}

/// How long one pull request of a failover subscriber waits: a fifth of the
/// pin timeout, so the pinned process renews its pin (every new pull does)
/// several times before it could expire, even while it receives nothing.
/// The pulls carry no idle heartbeat: one that comes late would count as a
/// failed pull, and the answer to each expired pull shows the stream alive.
pub(crate) fn pull_expiry(pinned_ttl: Duration) -> Duration {
    pinned_ttl / 5
}

/// Fails unless the server `context` is connected to has pinned-client
/// priority groups (nats-server 2.11 or later). Older servers ignore the
/// consumer's priority settings: the mode would silently be off.
pub(crate) fn check_server(
    context: &jetstream::Context,
    consumer: &str,
) -> Result<(), SubscriberBuildError> {
    let version = context.client().server_info().version;
    match major_minor(&version) {
        Some(found) if found >= FIRST_SERVER => Ok(()),
        _ => Err(SubscriberBuildError::FailoverUnsupported {
            consumer: consumer.to_owned(),
            server_version: version,
        }),
    }
}

/// The pin this process holds, as the messages it receives tell it: the
/// server stamps each message to the pinned client with the pin's id
/// (`Nats-Pin-Id`), a new id each time it pins a client.
#[derive(Debug, Default)]
pub(crate) struct Pin {
    current: Option<String>,
}

impl Pin {
    /// Whether `message` shows this process newly pinned: it carries a pin
    /// id other than the last one seen (the first message after a takeover,
    /// including the first this process ever receives).
    pub(crate) fn taken_over(&mut self, message: &async_nats::Message) -> bool {
        let Some(id) = message
            .headers
            .as_ref()
            .and_then(|headers| headers.get_last(async_nats::header::NATS_PIN_ID))
        else {
            return false;
        };
        if self.current.as_deref() == Some(id.as_str()) {
            return false;
        }
        self.current = Some(id.as_str().to_owned());
        true
    }

    /// The last pin id seen, if any.
    pub(crate) fn current(&self) -> Option<&str> {
        self.current.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(major_minor("2.9.10"), Some((2, 9)));
        assert_eq!(major_minor("2.10.22"), Some((2, 10)));
        assert_eq!(major_minor("2.11.0-RC.1"), Some((2, 11)));
        assert_eq!(major_minor("v2.14.0"), Some((2, 14)));
        assert_eq!(major_minor("3.0.0"), Some((3, 0)));
        assert_eq!(major_minor("garbage"), None);
        assert!(major_minor("2.10.29").is_some_and(|v| v < FIRST_SERVER));
        assert!(major_minor("2.11.1").is_some_and(|v| v >= FIRST_SERVER));
    }

    fn message(pin: Option<&str>) -> async_nats::Message {
        let mut headers = async_nats::HeaderMap::new();
        if let Some(pin) = pin {
            headers.insert(async_nats::header::NATS_PIN_ID, pin);
        }
        async_nats::Message {
            subject: "events.x".into(),
            reply: None,
            payload: Default::default(),
            headers: Some(headers),
            status: None,
            description: None,
            length: 0,
        }
    }

    #[test]
    fn a_new_pin_id_is_a_takeover_the_same_one_is_not() {
        let mut pin = Pin::default();
        assert!(!pin.taken_over(&message(None)));
        assert!(pin.taken_over(&message(Some("a"))));
        assert!(!pin.taken_over(&message(Some("a"))));
        assert!(!pin.taken_over(&message(None)));
        assert!(pin.taken_over(&message(Some("b"))));
    }
}
