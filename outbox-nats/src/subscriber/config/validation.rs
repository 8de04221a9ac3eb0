//! The builder's settings checked before anything is built: names, bounds,
//! settings that exclude each other (see [`SubscriberBuilder::check`]).

use std::time::Duration;

use crate::subscriber::SubscriberBuilder;
use crate::subscriber::config::error::SubscriberBuildError;
use crate::subscriber::setup::PullSpec;
use crate::subscriber::takeover::failover;

impl SubscriberBuilder {
    /// The durable consumers to read: `durable` itself, or one per owned
    /// partition.
    pub(crate) fn pulls(&self) -> Vec<PullSpec> {
        match &self.partitions {
            Some(owned) => owned.pulls(&self.durable),
            None => vec![PullSpec {
                durable: self.durable.clone(),
                filter: self.filter_subject.clone(),
            }],
        }
    }

    /// The consumer's `max_ack_pending`, as set or by default.
    pub(crate) fn window(&self) -> usize {
        self.max_ack_pending
            .unwrap_or_else(|| DEFAULT_MAX_ACK_PENDING.max(self.max_in_flight.saturating_mul(4)))
    }

    /// Validates the settings; returns the stream name.
    pub(crate) fn check(&self) -> Result<String, SubscriberBuildError> {
        let invalid = |what: String| Err(SubscriberBuildError::InvalidConfig(what));
        let durable = &self.durable;
        let bad_char = |c: char| c.is_whitespace() || matches!(c, '.' | '*' | '>' | '/' | '\\');
        if durable.is_empty() || durable.chars().any(bad_char) {
            return invalid(format!(
                "durable name `{durable}` must be non-empty, without whitespace, `.`, `*`, `>`, `/` or `\\`"
            ));
        }
        let Some(stream) = self.stream.clone() else {
            return invalid("the stream is required: call `stream(..)`".into());
        };
        if self.max_in_flight == 0 {
            return invalid("max_in_flight must be at least 1".into());
        }
        if self.window() <= self.max_in_flight {
            return invalid(format!(
                "max_ack_pending ({}) must be larger than max_in_flight ({}): \
                 messages waiting behind a failing one, or for a handler slot, count toward it",
                self.window(),
                self.max_in_flight
            ));
        }
        if self.max_deliver == 0 {
            return invalid("max_deliver must be at least 1".into());
        }
        if self.ack_wait < Duration::from_millis(100) {
            return invalid("ack_wait must be at least 100 ms".into());
        }
        if let Some(owned) = &self.partitions {
            owned.check(&self.filter_subject)?;
        }
        if self.reader_lease < crate::subscriber::takeover::MIN_LEASE {
            return invalid(format!(
                "the reader lease ({:?}) must be at least {:?}",
                self.reader_lease,
                crate::subscriber::takeover::MIN_LEASE
            ));
        }
        if let Some(pinned_ttl) = self.failover {
            if self.partitions.is_some() {
                return invalid(
                    "failover and partitions exclude each other: with failover one process \
                     receives the whole durable; with partitions each process owns its own"
                        .into(),
                );
            }
            if pinned_ttl < failover::MIN_PINNED_TTL {
                return invalid(format!(
                    "the failover pin timeout ({pinned_ttl:?}) must be at least {:?}",
                    failover::MIN_PINNED_TTL
                ));
            }
        }
        let filters: Vec<String> = self.pulls().into_iter().map(|pull| pull.filter).collect();
        self.dead_letter
            .check_apart_from(durable, &filters)
            .map_err(SubscriberBuildError::InvalidConfig)?;
        Ok(stream)
    }
}

/// The smallest default `max_ack_pending`: nats-server's own default, which
/// consumers created before the subscriber set it have.
const DEFAULT_MAX_ACK_PENDING: usize = 1_000;
