//! The store contract of `outbox-testing` (the checks every `OutboxStore`
//! passes) on PostgreSQL, MariaDB and SQLite, written through the real unit
//! of work; the in-memory store runs the same suite in `outbox-testing`,
//! and here too, so one run shows every backend side by side.

outbox_testing::store_contract_tests!(postgres, outbox_tests::contract::postgres);
outbox_testing::store_contract_tests!(mysql, outbox_tests::contract::mysql);
outbox_testing::store_contract_tests!(sqlite, outbox_tests::contract::sqlite);
outbox_testing::store_contract_tests!(memory, outbox_testing::contract::memory_store);
