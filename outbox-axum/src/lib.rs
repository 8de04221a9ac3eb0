//! An [axum](https://docs.rs/axum) runtime for the transactional outbox:
//! one [`Runtime`] owns a service's processor and its subscribers, serves
//! their health and the Prometheus metrics as an axum [`Router`](axum::Router),
//! and shuts them down in order after the server.
//!
//! ```no_run
//! # use txoutbox_nats::txoutbox_core;
//! # async fn run(
//! #     processor: txoutbox_core::processor::ProcessorBuilder<impl txoutbox_core::store::OutboxStore + 'static, impl txoutbox_core::publisher::Publisher>,
//! #     billing: txoutbox_nats::subscriber::SubscriberBuilder,
//! #     app: axum::Router,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! use txoutbox_axum::Runtime;
//!
//! // `processor`: `outbox.processor(publisher)`; `billing`:
//! // `Subscriber::builder(nats, "billing").stream("EVENTS").on(..)`.
//! let runtime = Runtime::builder()
//!     .processor(processor)
//!     .subscriber(billing)
//!     .start() // builds the subscribers (their consumers) and the processor, spawns them
//!     .await?;
//!
//! let app = app.merge(runtime.router()); // /health/live, /health/ready, /health/outbox, /metrics
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
//! axum::serve(listener, app)
//!     .with_graceful_shutdown(runtime.shutdown_signal()) // SIGTERM, Ctrl-C, or the token
//!     .await?;
//! runtime.shutdown().await?; // the subscribers finish their handlers, then the processor publishes what it holds
//! # Ok(()) }
//! ```
//!
//! # Starting while the broker is away
//!
//! With a client from `NatsConnect::connect` (which connects in the
//! background when the server cannot be reached), [`start`](RuntimeBuilder::start)
//! does not need the broker: the [streams](RuntimeBuilder::stream) are
//! ensured, and the subscribers create or verify their consumers, once it
//! answers; the processor waits for it as during an outage. Meanwhile each
//! subscriber's health says `connecting`, and
//! [`RuntimeHealth::stream_problems`] names the streams not ensured yet.
//! When the broker answers at start, what does not fit fails `start` as
//! before; when it answers later, it is logged at error level and stays in
//! the health's problems (a subscriber stops).
//!
//! # Health
//!
//! Three routes, three questions:
//!
//! - `/health/live`: **should this process be restarted?** 503 only when a
//!   part stopped on its own (the processor's task failed, a subscriber's
//!   consumer was deleted): a restart is the cure. It stays 200 while the
//!   runtime shuts down, so the orchestrator lets it finish.
//! - `/health/ready`: **should this process receive requests?** 200 while
//!   the runtime is not shutting down and its database answers (the
//!   processor's store, or a subscriber's inbox, probed within the
//!   [probe timeout](RuntimeBuilder::probe_timeout)). The outbox exists so
//!   that a service keeps taking writes while the broker is away: a broker
//!   outage, a subscriber's lag, a backlog or a held aggregate do not make
//!   it 503, so they cannot take every replica out of its load balancer at
//!   once. [`strict_readiness`](RuntimeBuilder::strict_readiness) makes the
//!   outbox's parts count too, for a service that wants it.
//! - `/health/outbox`: **how is the outbox doing?** The connection to NATS
//!   (`"connected"`, `"connecting"` before the first connection,
//!   `"disconnected"`), the processor's progress (its last claim, the
//!   oldest pending message, what is published but not yet recorded), and
//!   each subscriber's lag (`pending`), `ack_pending`, the messages it
//!   holds, its held aggregates and whether it is paused; `"status": "ok"`
//!   or `"degraded"`, with the degraded parts listed. It answers 200 either
//!   way, for a dashboard or a person; `/health/outbox?strict=true` answers
//!   503 when degraded, for a monitor that alerts on the status code.
//!
//! Every body is JSON and lists the problems, one line each ([`Liveness`],
//! [`Readiness`], [`OutboxHealth`]). The outbox's state is also in the
//! metrics, and the shipped alerts (`ops/prometheus`) fire on a broker
//! away, a stalled processor, a growing lag: that is where an operator
//! looks, rather than at a load balancer's pool.
//!
//! | during | `/health/live` | `/health/ready` | `/health/outbox` |
//! |---|---|---|---|
//! | a broker outage | 200 | 200 (writes are taken) | 200, `degraded`: `broker` `"disconnected"`, later the processor and the subscribers |
//! | a database outage | 200 | 503, `"database": "down"` | 200, `degraded` once the processor stalls or a subscriber pauses |
//! | a shutdown (SIGTERM) | 200 | 503, `"shutting_down": true` | as before |
//! | a part stopped on its own | 503 | 200 (503 when strict) | 200, `degraded` |
//!
//! # Metrics
//!
//! `/metrics` renders a `metrics-exporter-prometheus` recorder: the
//! processor's and the subscribers' metrics (`outbox_published_total`,
//! `outbox_oldest_pending_age_seconds`, `outbox_consumer_handled_total`,
//! ...: see `txoutbox_core::processor::metrics` and
//! [`txoutbox_nats::subscriber::metrics`]) and the application's own.
//! [`start`](RuntimeBuilder::start) installs the recorder, once per process,
//! unless [given a handle](RuntimeBuilder::metrics).
//!
//! The runtime adds two gauges of what only a probe sees, sampled every
//! 5 s while it runs:
//!
//! | name | labels | meaning |
//! |---|---|---|
//! | `outbox_broker_connected` | | 1 while the runtime's NATS connections are up, else 0 (connecting or disconnected); absent for a runtime that knows no client |
//! | `outbox_consumer_pending` | `consumer` | a subscriber's lag: messages of its stream not yet delivered to it, as the server last said |
//!
//! # Shutdown
//!
//! [`Runtime::shutdown_signal`] resolves on SIGTERM, Ctrl-C or the runtime's
//! [token](Runtime::shutdown_token); `axum::serve` then stops accepting and
//! finishes the requests in progress. [`Runtime::shutdown`] then stops the
//! subscribers (running handlers finish, their effects and the events
//! they record commit) and then the processor (it publishes what it holds,
//! records the acks and releases the rest): nothing stays leased, and
//! whatever a request committed is published by the next processor to run,
//! if not by this one.
//!
//! # Console
//!
//! With the `console` feature, [`Runtime::console`] turns a
//! [`txoutbox_console::ConsoleBuilder`] into one that also shows the
//! runtime's parts: the health page reads the processor's and the
//! subscribers' health, and the consumers page lists every subscriber with
//! its lag and held aggregates.
//!
//! # Feature flags
//!
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod builder;
#[cfg(feature = "console")]
mod console;
mod database;
mod error;
mod gauges;
mod health;
mod http_error;
mod metrics;
mod outbox_errors;
mod routes;
mod runtime;
mod signal;
mod source;
mod streams;

pub use builder::{DEFAULT_PROBE_TIMEOUT, RuntimeBuilder};
pub use database::DatabaseStatus;
pub use error::RuntimeError;
pub use health::{Liveness, Readiness, RuntimeHealth};
pub use http_error::HttpError;
pub use runtime::Runtime;
pub use source::{ProcessorSource, SubscriberSource};
// The outbox's state as `/health/outbox` serves it, shared with the web
// console's health page: defined in `txoutbox-nats`.
pub use txoutbox_nats::{BrokerConnection, OutboxHealth};

pub use axum;
pub use metrics_exporter_prometheus;
#[cfg(feature = "console")]
pub use txoutbox_console;
pub use txoutbox_nats;

/// This crate's README (crates.io's page), whose examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
