//! The processor's metrics, through the [`metrics`] facade: install any
//! recorder (Prometheus, StatsD, ...) and they appear; without one they
//! cost nothing.
//!
//! | name | kind | meaning |
//! |---|---|---|
//! | `outbox_published_total` | counter | messages the broker acknowledged |
//! | `outbox_duplicates_total` | counter | of those, acks for a message the broker had already (deduplicated re-publish) |
//! | `outbox_failed_total` | counter, label `kind` = `rejected` \| `permanent` \| `abandoned` | publishes the broker refused (each spends an attempt); `abandoned`: messages made dead because every processor that claimed them ended without settling them |
//! | `outbox_dead_total` | counter | messages that went `dead` |
//! | `outbox_released_total` | counter | claimed messages given back unpublished (broker unavailable, shutdown, an earlier message of the aggregate failed) |
//! | `outbox_broker_unavailable_total` | counter | times the processor paused because the broker was unavailable |
//! | `outbox_stale_settlements_total` | counter | settlements refused because the lease had passed to another processor |
//! | `outbox_commit_to_ack_seconds` | histogram | from the event's `occurred_at` (recorded just before commit) to the broker's ack |
//! | `outbox_batch_size` | histogram | messages per claimed batch |
//! | `outbox_pending` | gauge | unpublished messages (refreshed every `stats_interval`) |
//! | `outbox_dead` | gauge | dead messages |
//! | `outbox_oldest_pending_age_seconds` | gauge | how long the oldest due message that nothing holds back has waited (delayed messages and those behind a dead message do not count; see [`OutboxStats::oldest_pending_age`]): alarm on it, a stuck outbox shows here first |
//! | `outbox_delayed` | gauge | pending messages recorded with a delay and not due yet |
//! | `outbox_blocked_aggregates` | gauge | aggregates whose messages wait behind a dead message (requeue or skip it) |
//! | `outbox_unrecorded_publishes` | gauge | messages the broker acknowledged whose completion the database has not recorded yet (it was away when their batch settled): kept in memory and recorded first when it answers; the processor claims nothing while any wait |
//! | `outbox_purged_total` | counter | published rows past their age deleted by the processor's [cleanup](super::ProcessorBuilder::cleanup) |

use chrono::Utc;

use crate::message::OutboxMessage;
use crate::store::OutboxStats;

/// `outbox_published_total`.
pub const PUBLISHED: &str = "outbox_published_total";
/// `outbox_duplicates_total`.
pub const DUPLICATES: &str = "outbox_duplicates_total";
/// `outbox_failed_total`.
pub const FAILED: &str = "outbox_failed_total";
/// `outbox_dead_total`.
pub const DEAD: &str = "outbox_dead_total";
/// `outbox_released_total`.
pub const RELEASED: &str = "outbox_released_total";
/// `outbox_broker_unavailable_total`.
pub const BROKER_UNAVAILABLE: &str = "outbox_broker_unavailable_total";
/// `outbox_stale_settlements_total`.
pub const STALE: &str = "outbox_stale_settlements_total";
/// `outbox_commit_to_ack_seconds`.
pub const COMMIT_TO_ACK: &str = "outbox_commit_to_ack_seconds";
/// `outbox_batch_size`.
pub const BATCH_SIZE: &str = "outbox_batch_size";
/// `outbox_pending`.
pub const PENDING: &str = "outbox_pending";
/// `outbox_dead`.
pub const DEAD_GAUGE: &str = "outbox_dead";
/// `outbox_oldest_pending_age_seconds`.
pub const OLDEST_PENDING_AGE: &str = "outbox_oldest_pending_age_seconds";
/// `outbox_delayed`.
pub const DELAYED: &str = "outbox_delayed";
/// `outbox_blocked_aggregates`.
pub const BLOCKED_AGGREGATES: &str = "outbox_blocked_aggregates";
/// `outbox_unrecorded_publishes`.
pub const UNRECORDED: &str = "outbox_unrecorded_publishes";
/// Published rows deleted by the processor's cleanup.
pub const PURGED_TOTAL: &str = "outbox_purged_total";

pub(crate) fn acked(message: &OutboxMessage, duplicate: bool) {
    metrics::counter!(PUBLISHED).increment(1);
    if duplicate {
        metrics::counter!(DUPLICATES).increment(1);
    }
    let age = (Utc::now() - message.occurred_at)
        .to_std()
        .unwrap_or_default();
    metrics::histogram!(COMMIT_TO_ACK).record(age.as_secs_f64());
}

pub(crate) fn gauges(stats: &OutboxStats) {
    metrics::gauge!(PENDING).set(stats.pending as f64);
    metrics::gauge!(DEAD_GAUGE).set(stats.dead as f64);
    let age = stats.oldest_pending_age.unwrap_or_default();
    metrics::gauge!(OLDEST_PENDING_AGE).set(age.as_secs_f64());
    metrics::gauge!(DELAYED).set(stats.delayed as f64);
    metrics::gauge!(BLOCKED_AGGREGATES).set(stats.blocked_aggregates as f64);
}
