//! What every route of a console shares.

use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use txoutbox_nats::VerifyOutcome;
use txoutbox_nats::async_nats::jetstream;
use txoutbox_sea_orm::{Outbox, SeaOrmOutboxStore};

use crate::audit::AuditLog;
use crate::health::HealthSource;
use crate::operator::Authorizer;

/// A consumer the console shows: its durable name (the inbox's consumer)
/// and the stream it reads, for its lag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConsumerSpec {
    pub(crate) name: String,
    pub(crate) stream: Option<String>,
}

/// The last verify run.
#[derive(Debug, Clone)]
pub(crate) struct VerifyRecord {
    pub(crate) at: DateTime<Utc>,
    pub(crate) by: String,
    pub(crate) stream: String,
    pub(crate) took: Duration,
    pub(crate) result: Result<VerifyOutcome, String>,
}

/// The console's state, behind an `Arc`.
pub(crate) struct State {
    pub(crate) outbox: Outbox,
    pub(crate) store: SeaOrmOutboxStore,
    pub(crate) authorizer: Option<Box<dyn Authorizer>>,
    pub(crate) jetstream: Option<jetstream::Context>,
    pub(crate) stream: Option<String>,
    pub(crate) consumers: Vec<ConsumerSpec>,
    pub(crate) health: Option<Box<dyn HealthSource>>,
    pub(crate) refresh: Duration,
    pub(crate) sensitive: Vec<String>,
    pub(crate) rate_minutes: u32,
    pub(crate) audit: AuditLog,
    pub(crate) last_verify: Mutex<Option<VerifyRecord>>,
    pub(crate) verifying: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("table", &self.outbox.config().table().as_str())
            .field("authorized", &self.authorizer.is_some())
            .field("nats", &self.jetstream.is_some())
            .field("stream", &self.stream)
            .field("consumers", &self.consumers)
            .field("health", &self.health.is_some())
            .field("refresh", &self.refresh)
            .finish_non_exhaustive()
    }
}
