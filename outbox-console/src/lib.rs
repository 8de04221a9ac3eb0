//! A web console for the transactional outbox: what an operator looks at
//! when the outbox misbehaves, and the few changes they make, served by the
//! service itself (an axum [`Router`](axum::Router) it nests where it
//! likes) or by the `outbox console` command.
//!
//! ```no_run
//! # async fn run(outbox: txoutbox_sea_orm::Outbox, app: axum::Router) -> Result<(), Box<dyn std::error::Error>> {
//! use txoutbox_console::Console;
//!
//! let console = Console::builder(outbox).build(); // read-only
//! let app = app.nest("/outbox", console.router());
//! # let _ = app; Ok(()) }
//! ```
//!
//! # Pages
//!
//! Server-rendered HTML (no script at all), usable by keyboard alone (real
//! links and buttons, labelled fields, a visible focus ring), reloading on
//! their own every [ten seconds](ConsoleBuilder::refresh) (read pages only,
//! never a form):
//!
//! - **overview**: pending, leased, dead and skipped counts, the oldest
//!   pending age, the publish rate of the last 15 minutes (a bar chart from
//!   the table's published rows, by the database clock:
//!   `SeaOrmOutboxStore::published_per_minute`; flat when published rows are
//!   deleted as they are published), counts per event and aggregate type,
//!   blocked aggregates and what blocks them;
//! - **dead messages**: why each died and what waits behind it; one message
//!   with its envelope, headers and payload (fields named like secrets
//!   hidden: [`txoutbox_core::redact::redact_fields`]); requeue (selected,
//!   by event, all) and skip (selected, with a reason);
//! - **consumers** the application names: their lag from NATS and their
//!   held aggregates with the reason, released by retry or skip;
//! - **verify**: the last comparison of the table with the stream
//!   ([`txoutbox_nats::verify_stream`]) and a button to run it;
//! - **health** of the processor and subscribers, when the console runs in
//!   the service (the axum runtime's `Runtime::console`);
//! - **recent actions**: every change, who made it, what came of it.
//!
//! # Doors that stay shut
//!
//! - **Read-only by default.** Changes need an [`Authorizer`]: a predicate
//!   on the request naming the [`Operator`], or [`FromExtensions`] behind
//!   the application's own authentication layer. A request it names no
//!   operator for may read and not change.
//! - **Every change is confirmed** on a page of its own (`GET` never
//!   changes anything), **recorded** (a skip's note names the operator; every
//!   change is a `tracing` event with target `txoutbox_console::audit` and a
//!   line of the recent actions), and **protected against cross-site
//!   request forgery**: each form carries the session's random token (an
//!   `HttpOnly`, `SameSite=Strict` cookie), and a `POST` whose `Origin` is
//!   not the host it was sent to, or whose `Sec-Fetch-Site` is not
//!   `same-origin`, is refused (behind a reverse proxy, pass the browser's
//!   `Host` header on, as `proxy_set_header Host $host` does).
//! - **Nothing secret is shown**: no connection URL or credential at all;
//!   payload and header fields named like secrets are hidden
//!   ([`sensitive_field`](ConsoleBuilder::sensitive_field) adds names).
//! - **Headers**: a content security policy without script
//!   (`default-src 'none'`, `frame-ancestors 'none'`, `form-action 'self'`),
//!   `X-Frame-Options: DENY`, `Cache-Control: no-store`, `nosniff`.
//! - The console never listens by itself: the application decides where;
//!   `outbox console` listens on loopback unless told otherwise.
//!
//! # Feature flags
//!
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod audit;
mod console;
mod error;
mod health;
mod operator;
mod pages;
mod routes;
mod security;
mod state;
#[deprecated(
    note = "moved beside the other NATS code: `txoutbox_nats::{verify_stream, VerifyRequest, VerifyOutcome}`"
)]
pub mod verification;

pub use console::{Console, ConsoleBuilder, DEFAULT_REFRESH};
pub use error::ConsoleError;
#[allow(deprecated)]
pub use health::HealthReport;
pub use health::{HealthFuture, HealthSource};
pub use operator::{Authorizer, FromExtensions, Operator};

/// This crate's README (crates.io's page), whose examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
