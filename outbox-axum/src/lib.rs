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
//! let app = app.merge(runtime.router()); // /health/live, /health/ready, /metrics
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
//! `/health/live` answers 503 only when a part stopped on its own (the
//! processor's task failed, a subscriber's consumer was deleted): a restart
//! is the cure. `/health/ready` answers 503 while the runtime shuts down,
//! while the processor is stalled (claims failing, the broker away, or a
//! message pending longer than the [thresholds](RuntimeBuilder::health_thresholds)),
//! and while a subscriber is not running, not connected to NATS, or its
//! consumer is missing on the server; it reports each subscriber's lag
//! (`pending`: messages not yet delivered to it), `ack_pending`, the
//! messages it holds and its held aggregates. Both bodies are JSON and list
//! the problems, one line each ([`Liveness`], [`Readiness`]).
//!
//! The outbox keeps taking writes while the broker is away (that is its
//! point), but `/health/ready` then answers 503: point a load balancer's
//! readiness check at it only if the service should stop taking requests
//! then; otherwise alert on it.
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
mod error;
mod health;
mod http_error;
mod metrics;
mod routes;
mod runtime;
mod signal;
mod source;
mod streams;

pub use builder::{DEFAULT_PROBE_TIMEOUT, RuntimeBuilder};
pub use error::RuntimeError;
pub use health::{Liveness, Readiness, RuntimeHealth};
pub use http_error::HttpError;
pub use runtime::Runtime;
pub use source::{ProcessorSource, SubscriberSource};

pub use axum;
pub use metrics_exporter_prometheus;
#[cfg(feature = "console")]
pub use txoutbox_console;
pub use txoutbox_nats;

/// This crate's README (crates.io's page), whose examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
