//! NATS JetStream for the transactional outbox: the publisher the processor
//! sends with, stream provisioning, connection settings, and typed
//! subscribers.
//!
//! - [`JetStreamPublisher`]: implements [`txoutbox_core::Publisher`];
//!   `Nats-Msg-Id` = the outbox message id, CloudEvents headers from
//!   [`txoutbox_core::wire`], pipelined acks, failures classified so a broker
//!   outage never spends a message's attempts.
//! - [`StreamSpec`]: creates the stream or verifies the existing one
//!   (subjects, a duplicate window longer than the processor's lease).
//! - [`stream_read`]: reads back what a stream stored (headers only, from a
//!   time) and single messages, for reconciliation with the outbox table;
//!   [`verify_stream`] runs the whole verification (`outbox verify`, the
//!   web console's verify page) on any
//!   [`TableRecords`](txoutbox_core::verify::TableRecords).
//! - [`NatsConnect`]: credentials file, nkey, token, user/password, TLS, or
//!   the application's own `ConnectOptions` as the base.
//! - [`Subscriber`]: typed handlers (`on::<OrderPlaced>(..)`) on a durable
//!   pull consumer, with upcasts, retries with backoff, dead letters,
//!   per-aggregate order (across restarts and behind dead letters, with
//!   `keep_order`) and graceful shutdown (see [`subscriber`]); built from the
//!   same [`async_nats::Client`] as the publisher ([`IntoJetStream`]).
//! - [`OutboxHealth`]: a service's outbox state (the NATS connection, the
//!   processor, the subscribers), as `txoutbox-axum`'s `/health/outbox`
//!   answers it and `txoutbox-console`'s health page shows it.
//!
//! Feature `opentelemetry`: the subscriber's `outbox.consume` span becomes
//! the OpenTelemetry child of the message's `traceparent` (see
//! [`subscriber`], "Tracing and metrics").
//!
//! # Public dependencies
//!
//! [`async_nats`] (the `Client`, `jetstream::Context`, `ConnectOptions`,
//! connection and JetStream errors) and [`txoutbox_core`] appear in this
//! crate's API and are re-exported: depend on the same async-nats minor
//! version (0.51), or name it as `txoutbox_nats::async_nats`.
//!
//! # Secrets
//!
//! [`Auth`] and [`NatsConnect`] print `<redacted>` in place of tokens,
//! passwords, nkey seeds and URL passwords, and [`ConnectError`] names the
//! server without them: they are safe to log.
//!
//! # Durability of an ack
//!
//! A JetStream ack means the server has the message. A file stream is
//! fsynced every 60 s on nats-server 2.9 and every 2 minutes by default from
//! 2.10 on (`sync_interval` in the server's `jetstream` block, 2.10+), so an
//! ack means the OS page cache has it: a
//! power loss of a single server can lose acknowledged messages whose rows
//! are already marked published. For an ack that means "on disk", run a
//! cluster with `replicas(3)` (an ack then means a quorum stored it) and/or
//! set `sync_interval: always` (nats-server 2.10+) or a short interval.
//! Replaying from the outbox table is possible while rows are kept
//! (`Retention::KeepPublished`).
//!
//! # Feature flags
//!
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod connect;
mod jetstream_of;
mod outbox_health;
mod permissions;
mod publisher;
mod reconnects;
mod run_window;
mod server_version;
mod stream;
pub mod stream_read;
mod subject;
pub mod subscriber;
mod verify;

pub use connect::{
    Auth, ConnectError, DEFAULT_CONNECTION_TIMEOUT, DEFAULT_MAX_RECONNECT_DELAY, NatsConnect, Tls,
};
pub use jetstream_of::IntoJetStream;
pub use outbox_health::{BrokerConnection, OutboxHealth};
pub use permissions::{DeniedOperation, PermissionDenied};
pub use publisher::{DEFAULT_ACK_TIMEOUT, DEFAULT_MAX_ACKS_IN_FLIGHT, JetStreamPublisher};
pub use stream::{
    DEAD_LETTER_STREAM, DEFAULT_DUPLICATE_WINDOW, Ensured, OverlappingStream, StreamDifference,
    StreamError, StreamSpec,
};
pub use subscriber::{RunningSubscriber, Subscriber};
pub use verify::{VerifyError, VerifyOutcome, VerifyRequest, verify_stream};

pub use async_nats;
pub use txoutbox_core;

/// This crate's README (crates.io's page), whose examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
