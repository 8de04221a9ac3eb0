//! The subscriber's metrics, through the [`metrics`] facade.
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | `outbox_consumer_handled_total` | counter | `consumer`, `event`, `outcome` | messages settled, by outcome |
//! | `outbox_consumer_handler_duration_seconds` | histogram | `consumer`, `event` | time spent in the handler |
//! | `outbox_consumer_in_flight` | gauge | `consumer` | messages held: received and not yet settled (running, waiting for a handler slot, or waiting behind an earlier message of their aggregate); at most the consumer's `max_ack_pending` |
//! | `outbox_consumer_ack_failures_total` | counter | `consumer` | acks/naks that could not be sent (the message will be redelivered) |
//! | `outbox_consumer_held_aggregates` | gauge | `consumer` | aggregates held behind a message that could not be applied, waiting for an operator's release (with [`keep_order`](crate::subscriber::SubscriberBuilder::keep_order)) |
//! | `outbox_consumer_paused` | gauge | `consumer` | 1 while the subscriber is paused because its inbox's database is away (no handler starts, no delivery is spent; see [the subscriber's outages](crate::subscriber#database-outages)), else 0 |
//! | `outbox_inbox_messages_total` | counter | `consumer`, `outcome` | messages through the consumer's inbox (`txoutbox_sea_orm::Inbox`): `applied` (the handler's effects committed with the inbox row) or `duplicate` (applied before; the handler did not run) |
//! | `outbox_inbox_purged_total` | counter | `consumer` | inbox rows of long-applied messages deleted by the subscriber's [cleanup](crate::subscriber::SubscriberBuilder::cleanup) |
//!
//! `event` is the wire name of a handled event, or `unknown` for messages
//! no handler takes (so garbage cannot create label values). `outcome` is
//! one of:
//!
//! | outcome | what happened |
//! |---|---|
//! | `handled` | the handler succeeded; acked |
//! | `ignored` | no handler takes it (and the subscriber does not [dead-letter unhandled events](crate::subscriber::SubscriberBuilder::dead_letter_unhandled)); acked |
//! | `retried` | the handler failed; nakked with a backoff delay |
//! | `dead_lettered` | published to the dead-letter subject, then terminated |
//! | `dead_letter_failed` | the dead-letter publish failed; nakked to try again |
//! | `terminated` | terminated without a copy (dead-letter policy `terminate`) |
//! | `redelivered` | nakked for later (dead-letter policy `redeliver`) |
//! | `held` | its aggregate is held: parked behind the message it is held behind, acked |
//! | `abandoned` | nakked without delay at shutdown |
//! | `invalid_metadata` | its JetStream metadata (stream sequence, delivery count) could not be read; terminated, or only logged when it has no reply subject |

/// Messages settled, by consumer, event and outcome.
pub const HANDLED_TOTAL: &str = "outbox_consumer_handled_total";
/// Time spent in handlers, in seconds.
pub const HANDLER_DURATION_SECONDS: &str = "outbox_consumer_handler_duration_seconds";
/// Messages held by the subscriber.
pub const IN_FLIGHT: &str = "outbox_consumer_in_flight";
/// Acks and naks that could not be sent.
pub const ACK_FAILURES_TOTAL: &str = "outbox_consumer_ack_failures_total";
/// Aggregates held behind a message that could not be applied.
pub const HELD_AGGREGATES: &str = "outbox_consumer_held_aggregates";
/// 1 while the subscriber is paused because its inbox's database is away.
pub const PAUSED: &str = "outbox_consumer_paused";

/// Inbox rows deleted by the subscriber's cleanup.
pub const INBOX_PURGED: &str = "outbox_inbox_purged_total";

/// The `event` label of messages no handler takes.
pub(crate) const UNKNOWN_EVENT: &str = "unknown";
