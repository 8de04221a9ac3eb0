//! The `outbox` command on a terminal (a pseudo-terminal): `status --watch`
//! clears and redraws, showing a change made meanwhile; a change asks y/N
//! first, and only y changes anything.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use rexpect::process::WaitStatus;
use rexpect::session::{PtySession, spawn_command};
use support::{days_ago, execute, fill, id_of, outbox_of, url};
use txoutbox_core::store::{OutboxAdmin, SkipNote};
use txoutbox_fixtures::{Backend, TestDb};

/// `outbox ARGS` on a fresh pseudo-terminal, as user `tester`.
fn spawn(test: &TestDb, args: &[&str]) -> PtySession {
    let mut command = Command::new(env!("CARGO_BIN_EXE_outbox"));
    command
        .args(args)
        .env("DATABASE_URL", url(test))
        .env("USER", "tester");
    spawn_command(command, Some(20_000)).unwrap()
}

/// Waits for the process's end; its exit code.
fn exit_code(session: &mut PtySession) -> i32 {
    session.exp_eof().unwrap();
    match session.process().wait().unwrap() {
        WaitStatus::Exited(_, code) => code,
        other => panic!("ended by {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_redraws_and_sees_a_change() {
    let test = TestDb::with_schema(Backend::Sqlite).await;
    fill(&test).await;
    let mut watch = spawn(&test, &["status", "--watch", "1"]);
    // The first frame: the screen cleared, then the counts.
    watch.exp_string("\x1b[H\x1b[2J").unwrap();
    watch.exp_string("outbox status, every 1s").unwrap();
    watch.exp_string("dead     2").unwrap();
    watch.exp_string("skipped  0").unwrap();

    // Meanwhile an operator skips o-1's dead head.
    let dead = id_of(&test, "o-1", 1).await;
    assert!(
        outbox_of(&test)
            .store()
            .skip_dead(dead, &SkipNote::by("someone"))
            .await
            .unwrap()
    );
    // A later frame, redrawn in place, shows it.
    let before = watch.exp_string("skipped  1").unwrap();
    assert!(before.contains("\x1b[H\x1b[2J"), "redrawn: {before:?}");
    watch.exp_string("dead     1").unwrap();
    watch.send_control('c').unwrap();
    assert_eq!(exit_code(&mut watch), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_asks_first() {
    let test = TestDb::with_schema(Backend::Sqlite).await;
    fill(&test).await;
    let dead = id_of(&test, "o-1", 1).await.to_string();

    // n: nothing changes, exit 3.
    let mut skip = spawn(&test, &["dead", "skip", &dead, "--reason", "by hand"]);
    skip.exp_string(&format!("skip dead message {dead}"))
        .unwrap();
    skip.exp_string("2 message(s) wait behind it)? [y/N] ")
        .unwrap();
    skip.send_line("n").unwrap();
    skip.exp_string("outbox: nothing changed").unwrap();
    assert_eq!(exit_code(&mut skip), 3);
    assert_eq!(test.count("outbox_messages", "status = 2").await, 2);

    // y: skipped, recorded as the terminal's user.
    let mut skip = spawn(&test, &["dead", "skip", &dead, "--reason", "by hand"]);
    skip.exp_string("[y/N] ").unwrap();
    skip.send_line("y").unwrap();
    skip.exp_string(&format!("skipped {dead}")).unwrap();
    assert_eq!(exit_code(&mut skip), 0);
    assert_eq!(test.count("outbox_messages", "status = 2").await, 1);
    assert_eq!(
        test.count(
            "outbox_messages",
            "skipped_by LIKE 'tester@%' AND skip_reason = 'by hand'"
        )
        .await,
        1
    );

    // A purge asks, then shows its bar and what it removed.
    execute(
        &test,
        &format!(
            "UPDATE outbox_messages SET published_at = {} WHERE status = 1",
            days_ago(Backend::Sqlite, 10)
        ),
    )
    .await;
    let mut purge = spawn(
        &test,
        &["purge", "--published-before", "7d", "--batch-size", "1"],
    );
    purge
        .exp_string("delete 1 published or skipped message(s) settled more than 7days ago? [y/N] ")
        .unwrap();
    purge.send_line("y").unwrap();
    purge.exp_string("removed 1 messages").unwrap();
    assert_eq!(exit_code(&mut purge), 0);
    assert_eq!(test.count("outbox_messages", "status = 1").await, 0);
}
