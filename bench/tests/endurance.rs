//! The endurance part in small (issue 45): `txoutbox-bench endurance
//! --minutes 3` at a fixed, low rate, so its three children (writers,
//! processor, inbox consumer), the private PostgreSQL and nats-server, the
//! line a minute, the catch-up at the end and the verdict keep working. The
//! hour itself (`cargo run --release -p txoutbox-bench -- endurance
//! --minutes 60`) is a bench run, not part of the suite: its figures live in
//! BENCHMARKS.md. This run's figures are printed, not judged (they measure
//! whatever else the machine runs beside it); what fails it is a child that
//! exits, a minute without its counts or tables, or a consumer that has not
//! applied every committed event a minute after the writers stop.

mod common;

/// Minutes: the fewest the verdict compares (its second third against its
/// last).
const MINUTES: usize = 3;

#[test]
fn three_minutes_of_the_whole_pipeline_apply_every_event_and_give_a_verdict() {
    let minutes = MINUTES.to_string();
    let stdout = common::run_part(&[
        "endurance",
        "--minutes",
        &minutes,
        "--rate",
        "150",
        "--writers",
        "4",
        "--retention-secs",
        "30",
    ]);

    let minute_lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("min ")).collect();
    assert_eq!(
        minute_lines.len(),
        MINUTES,
        "one line a minute, each with its counts: {minute_lines:#?}"
    );
    for line in &minute_lines {
        assert!(
            line.contains(" applied ") && !line.contains("error"),
            "a minute without its figures: {line}"
        );
    }

    let end = stdout
        .lines()
        .find(|l| l.starts_with("the end: "))
        .expect("no `the end:` line");
    assert!(!end.contains("did not catch up"), "{end}");
    let counts: Vec<u64> = end
        .split_whitespace()
        .filter_map(|w| w.trim_end_matches(',').parse().ok())
        .collect();
    let [written, published, applied] = counts[..] else {
        panic!("`the end:` line without its three counts: {end}");
    };
    assert!(written > 0, "the writers wrote nothing: {end}");
    assert!(
        published >= written && applied >= written,
        "committed events not published or applied: {end}"
    );

    let verdict = stdout
        .lines()
        .find(|l| l.starts_with("endurance verdict: "))
        .expect("no verdict line");
    assert!(
        verdict.contains("; errors 0 (target 0) ok"),
        "the run counted errors: {verdict}"
    );
}
