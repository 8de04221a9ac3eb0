//! The chaos soak's short variant (issues 20 and 42): `txoutbox-bench soak
//! --short` writes 5,000 events through one processor kill, one broker
//! kill, one subscriber kill and one crash of the (private) PostgreSQL
//! server, down longer than the stream's 12-s duplicate window, reads the
//! stream back and fails on any event the writers counted but the table
//! lacks, loss, duplicate, order violation, dead row or effect not applied
//! exactly once. The full
//! soak (`cargo run --release -p txoutbox-bench -- soak`) runs minutes and is
//! not part of the suite.

use std::process::Command;
use std::time::Instant;

#[test]
fn the_short_soak_loses_nothing_duplicates_nothing_and_keeps_order() {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_txoutbox-bench"))
        .args(["soak", "--short"])
        .output()
        .expect("run txoutbox-bench soak --short");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "the short soak failed ({}) after {:?}",
        output.status,
        started.elapsed()
    );
    assert!(stdout.contains("soak PASSED"), "no verdict in its output");
    println!("the short soak took {:?}", started.elapsed());
}
