//! Support for the workspace-level integration tests in `tests/tests/`:
//! an isolated database per test on each real backend, and fixtures.

pub mod db;
pub mod orders;

pub use db::{Backend, TestDb};
