//! The chaos soak's short variant (issues 20 and 42): `txoutbox-bench soak
//! --short` writes 5,000 events through one processor kill, one broker
//! kill, one subscriber kill and one crash of the (private) PostgreSQL
//! server, down longer than the stream's 12-s duplicate window, reads the
//! stream back and fails on any event the writers counted but the table
//! lacks, loss, duplicate, order violation, dead row or effect not applied
//! exactly once. The full
//! soak (`cargo run --release -p txoutbox-bench -- soak`) runs minutes and is
//! not part of the suite.

mod common;

#[test]
fn the_short_soak_loses_nothing_duplicates_nothing_and_keeps_order() {
    let stdout = common::run_part(&["soak", "--short"]);
    assert!(stdout.contains("soak PASSED"), "no verdict in its output");
}
