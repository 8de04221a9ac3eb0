//! [`SubscriberSettings`]: a subscriber's settings as data, to load from a
//! configuration file (feature `serde`) and apply to a builder.

use std::time::Duration;

use super::backoff::Backoff;
use crate::subscriber::builder::SubscriberBuilder;
use crate::subscriber::groups::InboxGroups;

/// The settings of a [`SubscriberBuilder`] that are plain values; each one
/// left `None` keeps the builder's value (its default). Handlers, the
/// registry and the order-keeping inbox are code, set on the builder.
///
/// With the `serde` feature it loads from a configuration file, durations in
/// humantime form:
///
#[cfg_attr(feature = "serde", doc = "```")]
#[cfg_attr(not(feature = "serde"), doc = "```ignore")]
/// use txoutbox_nats::subscriber::{Subscriber, SubscriberSettings};
///
/// let settings: SubscriberSettings = serde_json::from_str(r#"{
///     "stream": "EVENTS", "filter_subject": "events.order.>",
///     "ack_wait": "45s", "max_deliver": 8,
///     "backoff": { "initial": "500ms", "max": "2m" }
/// }"#)?;
/// # async fn build(jetstream: txoutbox_nats::async_nats::jetstream::Context, settings: SubscriberSettings) {
/// let builder = Subscriber::builder(jetstream, "billing").settings(&settings);
/// # let _ = builder; }
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
#[non_exhaustive]
pub struct SubscriberSettings {
    /// [`SubscriberBuilder::stream`].
    pub stream: Option<String>,
    /// [`SubscriberBuilder::filter_subject`].
    pub filter_subject: Option<String>,
    /// [`SubscriberBuilder::max_in_flight`].
    pub max_in_flight: Option<usize>,
    /// [`SubscriberBuilder::max_ack_pending`].
    pub max_ack_pending: Option<usize>,
    /// [`SubscriberBuilder::max_deliver`].
    pub max_deliver: Option<u64>,
    /// [`SubscriberBuilder::ack_wait`].
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub ack_wait: Option<Duration>,
    /// [`SubscriberBuilder::idle_transaction_limit`] (`0s`: no bound).
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub idle_transaction_limit: Option<Duration>,
    /// [`SubscriberBuilder::backoff`] (exponential).
    pub backoff: Option<BackoffSettings>,
    /// [`SubscriberBuilder::shutdown_timeout`].
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub shutdown_timeout: Option<Duration>,
    /// [`SubscriberBuilder::dead_letter_unhandled`] when `true`.
    pub dead_letter_unhandled: Option<bool>,
    /// [`SubscriberBuilder::unordered`] when `true`.
    pub unordered: Option<bool>,
    /// [`SubscriberBuilder::failover_after`]: failover with this pin
    /// timeout (e.g. `"4s"`, the default of
    /// [`failover`](SubscriberBuilder::failover)).
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub failover_after: Option<Duration>,
    /// [`SubscriberBuilder::inbox_per_message`] when `true`.
    pub inbox_per_message: Option<bool>,
    /// [`InboxGroups::max_messages`](crate::subscriber::InboxGroups::max_messages)
    /// of the inbox groups (ignored with `inbox_per_message`).
    #[cfg_attr(feature = "serde", serde(alias = "inbox_batch_max_messages"))]
    pub inbox_group_max_messages: Option<usize>,
    /// [`InboxGroups::max_wait`](crate::subscriber::InboxGroups::max_wait) of the
    /// inbox groups.
    #[cfg_attr(
        feature = "serde",
        serde(with = "humantime_serde", alias = "inbox_batch_max_wait")
    )]
    pub inbox_group_max_wait: Option<Duration>,
    /// [`InboxGroups::transactions`](crate::subscriber::InboxGroups::transactions) of
    /// the inbox groups.
    #[cfg_attr(feature = "serde", serde(alias = "inbox_batch_transactions"))]
    pub inbox_group_transactions: Option<usize>,
}

/// An exponential [`Backoff`] as settings: `initial` doubling up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields)
)]
pub struct BackoffSettings {
    /// The delay after the first failed delivery.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub initial: Duration,
    /// The longest delay.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub max: Duration,
}

impl SubscriberBuilder {
    /// Applies every setting `settings` gives; the others stay as they are.
    pub fn settings(mut self, settings: &SubscriberSettings) -> Self {
        if let Some(stream) = &settings.stream {
            self = self.stream(stream);
        }
        if let Some(subject) = &settings.filter_subject {
            self = self.filter_subject(subject);
        }
        if let Some(max) = settings.max_in_flight {
            self = self.max_in_flight(max);
        }
        if let Some(max) = settings.max_ack_pending {
            self = self.max_ack_pending(max);
        }
        if let Some(max) = settings.max_deliver {
            self = self.max_deliver(max);
        }
        if let Some(ack_wait) = settings.ack_wait {
            self = self.ack_wait(ack_wait);
        }
        if let Some(limit) = settings.idle_transaction_limit {
            self = self.idle_transaction_limit(limit);
        }
        if let Some(backoff) = settings.backoff {
            self = self.backoff(Backoff::exponential(backoff.initial, backoff.max));
        }
        if let Some(timeout) = settings.shutdown_timeout {
            self = self.shutdown_timeout(timeout);
        }
        if settings.dead_letter_unhandled == Some(true) {
            self = self.dead_letter_unhandled();
        }
        if settings.unordered == Some(true) {
            self = self.unordered();
        }
        if let Some(pinned_ttl) = settings.failover_after {
            self = self.failover_after(pinned_ttl);
        }
        let group_settings = (
            settings.inbox_group_max_messages,
            settings.inbox_group_max_wait,
            settings.inbox_group_transactions,
        );
        if group_settings != (None, None, None) {
            let mut groups = InboxGroups::default();
            if let Some(max) = settings.inbox_group_max_messages {
                groups = groups.max_messages(max);
            }
            if let Some(wait) = settings.inbox_group_max_wait {
                groups = groups.max_wait(wait);
            }
            if let Some(transactions) = settings.inbox_group_transactions {
                groups = groups.transactions(transactions);
            }
            self = self.inbox_groups(groups);
        }
        if settings.inbox_per_message == Some(true) {
            self = self.inbox_per_message();
        }
        self
    }
}

#[cfg(all(test, feature = "serde"))]
mod tests {
    use std::time::Duration;

    use super::SubscriberSettings;

    #[test]
    fn inbox_groups_load_by_their_name_and_by_the_old_batch_keys() {
        let by_name: SubscriberSettings = serde_json::from_str(
            r#"{ "inbox_group_max_messages": 64, "inbox_group_max_wait": "5ms",
                 "inbox_group_transactions": 2 }"#,
        )
        .expect("the group keys");
        let by_old_keys: SubscriberSettings = serde_json::from_str(
            r#"{ "inbox_batch_max_messages": 64, "inbox_batch_max_wait": "5ms",
                 "inbox_batch_transactions": 2 }"#,
        )
        .expect("the old batch keys");
        assert_eq!(by_name, by_old_keys);
        assert_eq!(by_name.inbox_group_max_messages, Some(64));
        assert_eq!(by_name.inbox_group_max_wait, Some(Duration::from_millis(5)));
        assert_eq!(by_name.inbox_group_transactions, Some(2));
    }
}
