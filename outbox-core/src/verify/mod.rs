//! Reconciling the outbox table with the stream it publishes to: what the
//! table says was published against what the stream holds.
//!
//! The reads are the stores' and brokers' (`outbox-sea-orm` reads the
//! published rows through [`TableRecords`], `outbox-nats` the stream and
//! runs the whole verification: `txoutbox_nats::verify_stream`); this module
//! only compares, so the rules are the same whatever reads them:
//!
//! | check | discrepancy |
//! |---|---|
//! | every row marked published has its message in the stream (matched by `Nats-Msg-Id` = message id) | [`Discrepancy::Missing`] |
//! | no message id is stored twice in the stream (a re-publish after the duplicate window) | [`Discrepancy::Duplicate`] |
//! | per aggregate, stream sequences increase with the aggregate sequence | [`Discrepancy::OutOfOrder`] |
//! | no row older than a threshold is still pending | [`Discrepancy::StalePending`] |
//!
//! ```
//! use txoutbox_core::MessageId;
//! use txoutbox_core::verify::{Discrepancy, PublishedRecord, StreamedMessage, reconcile};
//!
//! let id = MessageId::new();
//! let row = PublishedRecord {
//!     id, aggregate_type: "order".into(), aggregate_id: "o-1".into(),
//!     sequence: 1, stream_sequence: Some(7),
//! };
//! // The stream lost it.
//! let report = reconcile(&[row], &[], Vec::new());
//! assert!(matches!(report.discrepancies[..], [Discrepancy::Missing { .. }]));
//! assert!(!report.is_clean());
//! ```

mod discrepancy;
mod reconciliation;
mod records;
mod table;

pub use discrepancy::Discrepancy;
pub use reconciliation::{Reconciliation, reconcile};
pub use records::{AggregatePosition, PublishedRecord, StalePending, StreamedMessage};
pub use table::TableRecords;
