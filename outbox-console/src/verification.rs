//! Verifying the outbox table against its stream: moved to `txoutbox-nats`
//! beside the other NATS code ([`txoutbox_nats::verify_stream`], on any
//! [`TableRecords`](txoutbox_core::verify::TableRecords), which
//! `txoutbox_sea_orm::Outbox` and its store implement). These names stay
//! until 0.2; its error is now [`txoutbox_nats::VerifyError`] (a
//! [`ConsoleError`](crate::ConsoleError) converts from it).

pub use txoutbox_nats::{VerifyOutcome, VerifyRequest, verify_stream};
