//! What the bench's suite tests share: running a part of the bench binary.

use std::process::Command;
use std::time::Instant;

/// Runs `txoutbox-bench <args>`, prints what it printed, fails the test if
/// it did not exit successfully, and returns its standard output.
pub(crate) fn run_part(args: &[&str]) -> String {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_txoutbox-bench"))
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("run txoutbox-bench {}: {err}", args.join(" ")));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "txoutbox-bench {} failed ({}) after {:?}",
        args.join(" "),
        output.status,
        started.elapsed()
    );
    println!(
        "txoutbox-bench {} took {:?}",
        args.join(" "),
        started.elapsed()
    );
    stdout
}
