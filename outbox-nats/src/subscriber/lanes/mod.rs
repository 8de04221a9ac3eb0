//! Lanes: each aggregate's messages one after another, in stream order,
//! different aggregates in parallel. A message goes from the fetch loop
//! into its aggregate's lane, through dispatch (envelope, handler, decision)
//! to its settlement (ack, nak with a delay, or dead letter).
//!
//! Lane state changes only through [`Lanes`]' operations: `admit` a
//! message, `take` (or `take_run`) its front, `send_away` one nakked for a
//! retry and `expect` it back, list those `overdue` and `forget` those the
//! server settled, `put_back` one not settled, `release` what a hold
//! parked, `sweep` the forgotten, read what is `waiting`. The other
//! folders name lanes through this front door only ([`Lanes`], [`Queued`],
//! [`Front`], [`LaneKey`], [`lane_key`],
//! [`lane_of`]); `ordering` itself is private to `lanes/`.

pub(crate) mod dispatch;
pub(crate) mod fetch;
mod ordering;
mod overdue;
pub(crate) mod settle;
pub(crate) mod stalled_pulls;
pub(crate) mod worker;

pub(crate) use ordering::{Front, LaneKey, Lanes, Queued, lane_key, lane_of};

pub(crate) use dispatch::{Acked, Decision, Delivered, Incoming, Verdict, header, header_pairs_of};
#[cfg(feature = "opentelemetry")]
pub(crate) use worker::continue_trace;
pub(crate) use worker::{Stop, handle_job};
