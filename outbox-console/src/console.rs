//! [`Console`] and its [`ConsoleBuilder`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use txoutbox_core::redact::SENSITIVE_FIELDS;
use txoutbox_nats::async_nats::jetstream;
use txoutbox_sea_orm::Outbox;

use crate::audit::AuditLog;
use crate::health::HealthSource;
use crate::operator::Authorizer;
use crate::routes;
use crate::state::{ConsumerSpec, State};

/// How often read pages reload unless [told otherwise](ConsoleBuilder::refresh).
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(10);

/// Minutes of the overview's publish-rate chart.
const RATE_MINUTES: u32 = 15;

/// The web console of an outbox: build it with [`Console::builder`], then
/// [`nest`](axum::Router::nest) its [`router`](Console::router) where the
/// application wants it. Cheap to clone: clones share the recent actions
/// and the last verify run.
#[derive(Debug, Clone)]
pub struct Console {
    state: Arc<State>,
}

impl Console {
    /// A console of `outbox` (its table and its inbox table), read-only
    /// until an [authoriser](ConsoleBuilder::authorize) is given.
    pub fn builder(outbox: Outbox) -> ConsoleBuilder {
        ConsoleBuilder {
            outbox,
            authorizer: None,
            jetstream: None,
            stream: None,
            consumers: Vec::new(),
            health: None,
            refresh: DEFAULT_REFRESH,
            sensitive: SENSITIVE_FIELDS.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// The pages, for any application state, to nest under a path of the
    /// application's choosing (every link is relative to where it is
    /// mounted):
    ///
    /// | route | page |
    /// |---|---|
    /// | `GET /` | overview: pending, leased, dead, oldest pending age, publish rate, per event and aggregate type, blocked aggregates |
    /// | `GET /dead`, `GET /dead/{id}` | dead messages, one message (payload redacted) |
    /// | `GET /dead/confirm`, `POST /dead/requeue`, `POST /dead/skip` | requeue or skip: confirmation, then the change |
    /// | `GET /consumers`, `GET`/`POST /consumers/{name}/release` | lag and held aggregates; releasing one |
    /// | `GET`/`POST /verify` | the last verify run; running it |
    /// | `GET /health` | the processor's and subscribers' health |
    /// | `GET /actions` | recent changes, who made them |
    pub fn router<S>(&self) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        routes::router(self.state.clone())
    }
}

/// Settings of a [`Console`].
#[must_use]
pub struct ConsoleBuilder {
    outbox: Outbox,
    authorizer: Option<Box<dyn Authorizer>>,
    jetstream: Option<jetstream::Context>,
    stream: Option<String>,
    consumers: Vec<ConsumerSpec>,
    health: Option<Box<dyn HealthSource>>,
    refresh: Duration,
    sensitive: Vec<String>,
}

impl std::fmt::Debug for ConsoleBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleBuilder")
            .field("authorized", &self.authorizer.is_some())
            .field("nats", &self.jetstream.is_some())
            .field("stream", &self.stream)
            .field("consumers", &self.consumers)
            .field("refresh", &self.refresh)
            .finish_non_exhaustive()
    }
}

impl ConsoleBuilder {
    /// Lets the operators `authorizer` names change things (requeue, skip,
    /// release, run verify); without it the console is read-only. See
    /// [`Authorizer`].
    pub fn authorize(mut self, authorizer: impl Authorizer) -> Self {
        self.authorizer = Some(Box::new(authorizer));
        self
    }

    /// NATS, for the consumers' lag and for verify.
    pub fn nats(mut self, jetstream: jetstream::Context) -> Self {
        self.jetstream = Some(jetstream);
        self
    }

    /// The stream the outbox publishes to: verify reads it, and consumers
    /// added with [`consumer`](Self::consumer) read it.
    pub fn stream(mut self, stream: impl Into<String>) -> Self {
        self.stream = Some(stream.into());
        self
    }

    /// Shows consumer `durable` (its inbox's consumer name and its durable
    /// consumer on the [stream](Self::stream)): its lag and held aggregates.
    pub fn consumer(mut self, durable: impl Into<String>) -> Self {
        let name = durable.into();
        self.consumers.retain(|c| c.name != name);
        self.consumers.push(ConsumerSpec { name, stream: None });
        self
    }

    /// Shows consumer `durable` of `stream`.
    pub fn consumer_on(mut self, stream: impl Into<String>, durable: impl Into<String>) -> Self {
        let name = durable.into();
        self.consumers.retain(|c| c.name != name);
        self.consumers.push(ConsumerSpec {
            name,
            stream: Some(stream.into()),
        });
        self
    }

    /// Where the health page reads the processor's and subscribers' health
    /// (the axum runtime gives it); without, the page says the console runs
    /// outside the service.
    pub fn health(mut self, source: impl HealthSource) -> Self {
        self.health = Some(Box::new(source));
        self
    }

    /// How often read pages reload (default [`DEFAULT_REFRESH`]; zero: never).
    pub fn refresh(mut self, every: Duration) -> Self {
        self.refresh = every;
        self
    }

    /// Also hides payload and header fields whose names contain `name`
    /// (besides [`SENSITIVE_FIELDS`]: `password`, `secret`, `token`, ...).
    pub fn sensitive_field(mut self, name: impl Into<String>) -> Self {
        self.sensitive.push(name.into());
        self
    }

    /// The console.
    pub fn build(self) -> Console {
        let stream = self.stream;
        let consumers = self
            .consumers
            .into_iter()
            .map(|mut c| {
                c.stream = c.stream.or_else(|| stream.clone());
                c
            })
            .collect();
        let store = self.outbox.store();
        Console {
            state: Arc::new(State {
                outbox: self.outbox,
                store,
                authorizer: self.authorizer,
                jetstream: self.jetstream,
                stream,
                consumers,
                health: self.health,
                refresh: self.refresh,
                sensitive: self.sensitive,
                rate_minutes: RATE_MINUTES,
                audit: AuditLog::default(),
                last_verify: Mutex::new(None),
                verifying: tokio::sync::Mutex::new(()),
            }),
        }
    }
}
