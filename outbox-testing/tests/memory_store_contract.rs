//! The store contract, on the in-memory store (the SQL stores run the same
//! suite in the workspace's `tests/tests/store/store_contract.rs`).

txoutbox_testing::store_contract_tests!(memory, txoutbox_testing::contract::memory_store);
