//! Workspace-level integration tests of the outbox crates; the tests live in
//! `tests/tests/`. This library holds nothing yet: it is where shared test
//! support (service start-up, fixtures) goes as the backends arrive.
