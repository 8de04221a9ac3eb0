//! The `outbox` command's holds and releases of a consumer's aggregates,
//! changes refused without --yes off a terminal, help and completions, and
//! connection errors.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use serde_json::Value;
use support::{fill, json, outbox, outbox_of};
use txoutbox_core::MessageId;
use txoutbox_core::consumer::{HeldMessages, ParkedMessage, Release};
use txoutbox_fixtures::{Backend, TestDb};
use txoutbox_sea_orm::Inbox;

async fn holds_and_releases(backend: Backend) {
    let test = TestDb::with_schema(backend).await;
    fill(&test).await;

    // Changes need --yes without a terminal: exit 2, nothing changed.
    let run = outbox(&test, &["dead", "requeue", "--all"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        run.err,
        "outbox: refusing to requeue all 2 dead message(s) without --yes (no terminal to ask on)\n"
    );
    assert_eq!(test.count("outbox_messages", "status = 2").await, 2);
    let run = outbox(
        &test,
        &["dead", "requeue", "--event", "test.order.placed", "--yes"],
    );
    assert!(run.out.contains("requeued 2"), "{run:?}");
    assert_eq!(test.count("outbox_messages", "status = 2").await, 0);
    let run = outbox(&test, &["dead", "requeue", "--yes"]);
    assert_eq!(run.code, 2);
    assert!(run.err.contains("name the messages"), "{run:?}");

    // A consumer's held aggregate, released.
    let inbox = Inbox::new(&outbox_of(&test), "billing").unwrap();
    HeldMessages::park(
        &inbox,
        ParkedMessage::new(
            MessageId::new(),
            "order",
            "o-9",
            7,
            "events.order.paid",
            vec![("ce-type".to_owned(), "order.paid".to_owned())],
            b"{}".to_vec(),
            Some("rejected: card declined".to_owned()),
        ),
    )
    .await
    .unwrap();
    let holds = json(&test, &["holds", "--consumer", "billing"]);
    assert_eq!(holds[0]["aggregate_id"], "o-9");
    assert_eq!(holds[0]["reason"], "rejected: card declined");
    assert_eq!(holds[0]["release"], Value::Null);
    let release = ["release", "--consumer", "billing", "order", "o-9", "--skip"];
    let run = outbox(&test, &release);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(inbox.holds().await.unwrap()[0].release, None);
    let run = outbox(&test, &[&release[..], &["--yes"]].concat());
    assert!(run.out.contains("released order/o-9 (skip)"), "{run:?}");
    assert_eq!(inbox.holds().await.unwrap()[0].release, Some(Release::Skip));
    let run = outbox(
        &test,
        &[
            "release",
            "--consumer",
            "billing",
            "order",
            "o-404",
            "--yes",
        ],
    );
    assert_eq!(run.code, 1);
    assert_eq!(
        run.err,
        "outbox: order/o-404 is not held for consumer billing\n"
    );
}

fn outbox_with_url(url: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_outbox"));
    command.args(args).env_remove("DATABASE_URL");
    if let Some(url) = url {
        command.env("DATABASE_URL", url);
    }
    command.output().unwrap()
}

#[test]
fn connection_errors_are_one_line() {
    for (url, expected) in [
        (
            Some("postgres://nobody@127.0.0.1:1/none"),
            "outbox: connecting to the database: ",
        ),
        (Some("nosuchdb://x"), "outbox: connecting to the database: "),
        (None, "outbox: set DATABASE_URL or --database-url\n"),
    ] {
        let output = outbox_with_url(url, &["status"]);
        assert!(!output.status.success());
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(err.starts_with(expected), "{url:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn help_reads_like_a_man_page() {
    let output = outbox_with_url(None, &["--help"]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for part in [
        "Examples:",
        "Environment:",
        "DATABASE_URL",
        "Exit codes:",
        "3  answered no",
    ] {
        assert!(help.contains(part), "{part}: {help}");
    }
    let output = outbox_with_url(None, &["dead", "skip", "--help"]);
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(
        help.contains("$USER@host") && help.contains("Exit codes:"),
        "{help}"
    );
}

#[test]
fn completions_need_no_database() {
    for shell in ["bash", "zsh", "fish"] {
        let output = outbox_with_url(None, &["completions", shell]);
        assert!(output.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&output.stdout);
        assert!(
            script.contains("requeue") && script.contains("purge"),
            "{shell}"
        );
    }
}

txoutbox_fixtures::each_backend!(empty: holds_and_releases);
