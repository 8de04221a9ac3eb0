//! The store contract of `outbox-testing` (the checks every `OutboxStore`
//! passes) on PostgreSQL, MariaDB and SQLite, written through the real unit
//! of work; the in-memory store runs the same suite in `outbox-testing`,
//! and here too, so one run shows every backend side by side.

txoutbox_testing::store_contract_tests!(postgres, txoutbox_suite::contract::postgres);
txoutbox_testing::store_contract_tests!(mysql, txoutbox_suite::contract::mysql);
txoutbox_testing::store_contract_tests!(sqlite, txoutbox_suite::contract::sqlite);
txoutbox_testing::store_contract_tests!(memory, txoutbox_testing::contract::memory_store);
