//! Compile-time tests of `#[derive(IntegrationEvent)]` and `#[derive(AggregateRoot)]`:
//! programs that must build (and run) and programs that must fail with a given error.

/// Runs every case under `tests/ui/pass` and `tests/ui/fail`.
///
/// The expected errors live next to the failing cases as `.stderr` files.
/// After changing a message or span on purpose, regenerate them with
/// `TRYBUILD=overwrite cargo test -p txoutbox-macros --test ui` and review the
/// diff.
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
