//! `--help` on every program the README and the guide tell a person to run
//! from this package: the demo and each example print their documentation
//! and exit 0 without touching a server.

use std::path::PathBuf;
use std::process::Command;

/// The examples, built beside the tests: `cargo test` builds each as a
/// program, except `testing_a_service` (declared `test = true`: `cargo test`
/// builds it as its test harness only), which `scripts/test.sh` builds first
/// with `cargo build --workspace --examples`.
const EXAMPLES: [&str; 9] = [
    "add_to_service",
    "annotate_event",
    "axum_service",
    "broker_outage",
    "enqueue_in_transaction",
    "metrics_endpoint",
    "processor_process",
    "subscribe",
    "testing_a_service",
];

fn example(name: &str) -> PathBuf {
    let deps = std::env::current_exe().expect("this test's path");
    deps.parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>")
        .join("examples")
        .join(name)
}

fn assert_helps(program: PathBuf, first_line: &str) {
    assert!(
        program.exists(),
        "{} is not built: `cargo build --workspace --examples` builds it \
         (scripts/test.sh does, before the tests)",
        program.display()
    );
    let output = Command::new(&program)
        .arg("--help")
        // A server it would reach: none.
        .env("NATS_URL", "127.0.0.1:1")
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{} --help: {}\n{stdout}\n{}",
        program.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.starts_with(first_line),
        "{} --help prints its documentation:\n{stdout}",
        program.display()
    );
}

#[test]
fn the_demo_answers_help() {
    assert_helps(env!("CARGO_BIN_EXE_orders-demo").into(), "The orders demo:");
}

#[test]
fn every_example_answers_help() {
    for name in EXAMPLES {
        let source = std::fs::read_to_string(format!("examples/{name}.rs")).expect("its source");
        let doc = txoutbox_examples::support::doc_of(&source);
        let first = doc.lines().next().expect("a doc line");
        assert_helps(example(name), first);
    }
}
