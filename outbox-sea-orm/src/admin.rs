//! What [`SeaOrmOutboxStore`](crate::SeaOrmOutboxStore) shows an operator
//! (the `outbox` command's `status`, `dead`, `aggregate` and `verify`):
//! dead and stored messages, an aggregate's queue, the overview. The
//! operator's calls themselves are
//! [`OutboxAdmin`](txoutbox_core::store::OutboxAdmin)'s and the store's own
//! methods.

pub use crate::store::{
    AggregateQueue, AggregateTypeStats, BlockedAggregate, DeadMessage, MessageState, Overview,
    STATS_EXACT_PENDING, StoredMessage,
};
