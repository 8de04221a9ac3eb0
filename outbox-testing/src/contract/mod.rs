//! The store contract: what every [`OutboxStore`] (the processor's calls)
//! and [`OutboxAdmin`] (the operator's calls) must do, as checks that
//! run against any store, so one suite proves the SQL stores (PostgreSQL,
//! MariaDB, SQLite) and [`MemoryStore`](crate::MemoryStore) alike.
//!
//! A store under test comes with a [`ContractWriter`] (how to commit new
//! events of an aggregate into it, as the store's unit of work does);
//! [`store_contract_tests!`](crate::store_contract_tests) then writes one
//! `#[tokio::test]` per check, each on a fresh, empty store and its writer
//! from the factory it is given:
//!
//! ```
//! txoutbox_testing::store_contract_tests!(memory, txoutbox_testing::contract::memory_store);
//! ```
//!
//! The checks use the wall clock with short leases (a few hundred
//! milliseconds) and short backoffs, so a database's own clock serves.

mod checks;
mod memory;

use std::future::Future;
use std::time::Duration;

use txoutbox_core::store::OutboxAdmin;
use txoutbox_core::{MessageId, OutboxStore};

pub use checks::*;
pub use memory::memory_store;

/// A store the checks run on: any [`OutboxStore`] and [`OutboxAdmin`] they
/// can clone into concurrent claimers.
pub trait ContractStore: OutboxStore + OutboxAdmin + Clone + 'static {}

impl<S: OutboxStore + OutboxAdmin + Clone + 'static> ContractStore for S {}

/// How the contract checks write into the store under test.
pub trait ContractWriter: Send + Sync + 'static {
    /// Commits `count` new events of the aggregate `aggregate_id` (of a
    /// type of the implementation's choosing), after the ones it already
    /// has, in one transaction; returns their ids in sequence order.
    fn append(
        &self,
        aggregate_id: &str,
        count: usize,
    ) -> impl Future<Output = Vec<MessageId>> + Send;

    /// Commits one new event of the aggregate `aggregate_id`, after the
    /// ones it already has, to be published no earlier than `delay` from
    /// now (a delayed message); returns its id.
    fn append_delayed(
        &self,
        aggregate_id: &str,
        delay: Duration,
    ) -> impl Future<Output = MessageId> + Send;

    /// Whether published messages stay in the table (until purged) rather
    /// than being deleted at completion.
    fn keeps_published(&self) -> bool;
}

/// Writes one `#[tokio::test]` per contract check, in a module named
/// `$module`, each on a fresh store from `$factory`: an `async fn() -> (S,
/// W)` where `S:` [`ContractStore`] and `W:` [`ContractWriter`]
/// writes into that store. The calling crate needs `tokio` with its
/// `macros` and `rt-multi-thread` features, as for any `#[tokio::test]`.
#[macro_export]
macro_rules! store_contract_tests {
    ($module:ident, $factory:path) => {
        mod $module {
            $crate::store_contract_tests!(@each $factory;
                claims_each_aggregate_in_sequence_order,
                a_claim_says_whether_more_may_be_waiting,
                never_hands_out_a_message_behind_an_unpublished_one,
                claim_ids_takes_only_what_a_claim_could,
                a_live_lease_is_exclusive_among_claimers,
                an_expired_lease_is_taken_over_and_counted_as_abandoned,
                settlements_are_fenced_by_the_lease_token,
                renew_extends_exactly_the_named_messages,
                release_spends_no_attempt,
                a_retryable_failure_backs_off_and_holds_its_aggregate,
                a_dead_message_holds_its_aggregate_until_requeued,
                requeue_forgets_abandoned_claims,
                a_skipped_dead_message_releases_its_aggregate,
                stats_count_pending_leased_and_dead,
                stats_count_delayed_and_blocked_apart_from_the_age,
                purge_removes_only_old_published_messages,
            );
        }
    };
    (@each $factory:path; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                $crate::contract::$check($factory().await).await;
            }
        )*
    };
}
