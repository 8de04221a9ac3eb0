//! `outbox release --consumer C --all`: it shows how many held aggregates
//! it would release and the first few (oldest hold first), asks on a
//! terminal (only y releases) and needs --yes elsewhere; the filters
//! (aggregate type, reason text ignoring case, held before / after) keep
//! only what they name; it releases in batches, retry or skip, and never
//! twice; on PostgreSQL, MariaDB and SQLite.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use rexpect::process::WaitStatus;
use rexpect::session::spawn_command;
use support::{days_ago, execute, outbox, outbox_of, url};
use txoutbox_core::MessageId;
use txoutbox_core::consumer::{HeldMessages, ParkedMessage, Release};
use txoutbox_fixtures::holds::released;
use txoutbox_fixtures::{Backend, TestDb};
use txoutbox_sea_orm::Inbox;

/// Holds `aggregate_type/aggregate_id` of consumer `billing` behind a
/// message that failed for `reason`, with one message parked behind it.
async fn hold(inbox: &Inbox, aggregate_type: &str, aggregate_id: &str, reason: &str) {
    for (sequence, reason) in [(1, Some(reason.to_owned())), (2, None)] {
        let message = ParkedMessage::new(
            MessageId::new(),
            aggregate_type,
            aggregate_id,
            sequence,
            "events.order.paid",
            vec![("ce-type".to_owned(), "order.paid".to_owned())],
            b"{}".to_vec(),
            reason,
        );
        HeldMessages::park(inbox, message).await.unwrap();
    }
}

/// Four holds: invoice/i-1, order/o-2, order/o-3 held now, order/o-1 held
/// three days ago (parked last, so only the time makes it the oldest).
async fn four_holds(test: &TestDb) -> Inbox {
    let inbox = Inbox::new(&outbox_of(test), "billing").unwrap();
    hold(
        &inbox,
        "invoice",
        "i-1",
        "rejected: Card declined (100% sure)",
    )
    .await;
    hold(&inbox, "order", "o-2", "timeout: payment service").await;
    hold(&inbox, "order", "o-3", "decode: 1000 bytes of garbage").await;
    hold(&inbox, "order", "o-1", "rejected: card declined").await;
    let three_days_ago = days_ago(test.backend(), 3);
    execute(
        test,
        &format!(
            "UPDATE outbox_inbox_held SET parked_at = {three_days_ago} WHERE aggregate_id = 'o-1'"
        ),
    )
    .await;
    inbox
}

async fn release_all_with_filters(backend: Backend) {
    let test = TestDb::with_schema(backend).await;
    let inbox = four_holds(&test).await;
    let release = |extra: &[&str]| {
        let args = [&["release", "--consumer", "billing", "--all"], extra].concat();
        outbox(&test, &args)
    };

    // No terminal and no --yes: the count and the first few, then a refusal.
    let run = release(&[]);
    assert_eq!(run.code, 2, "{run:?}");
    let mut lines = run.out.lines();
    assert_eq!(
        lines.next(),
        Some("4 held aggregate(s) of consumer billing to release (every hold), oldest first:")
    );
    let oldest = lines.next().unwrap();
    assert!(
        oldest.starts_with("  order/o-1  held since ")
            && oldest.ends_with("behind order.paid, 1 waiting: rejected: card declined"),
        "{oldest}"
    );
    assert_eq!(
        run.err,
        "outbox: refusing to release 4 held aggregate(s) of consumer billing (retry: apply the \
         message each is held behind again) without --yes (no terminal to ask on)\n"
    );
    assert!(released(&inbox).await.is_empty());

    // Filters need --all; --all takes no aggregate.
    for args in [
        &[
            "release",
            "--consumer",
            "billing",
            "order",
            "o-1",
            "--reason",
            "x",
        ][..],
        &["release", "--consumer", "billing", "order", "o-1", "--all"],
    ] {
        let run = outbox(&test, args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
    }

    // Held before a day ago: o-1 only, skipped.
    let run = release(&["--held-before", "1d", "--skip", "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.out
            .contains("released 1 held aggregate(s) of consumer billing (skip)"),
        "{run:?}"
    );
    assert_eq!(released(&inbox).await, ["order/o-1 (skip)"]);

    // A reason, any case: i-1 (o-1 is released already and stays skip).
    let run = release(&["--reason", "CARD DECLINED", "--yes"]);
    assert!(run.out.contains("released 1 "), "{run:?}");
    assert_eq!(
        released(&inbox).await,
        ["invoice/i-1 (retry)", "order/o-1 (skip)"]
    );

    // `%` is a plain character: "100%" is not in o-3's "1000 bytes".
    let run = release(&["--aggregate-type", "order", "--reason", "100%", "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.out,
        "no held aggregate of consumer billing left to release (aggregate type order, reason \
         containing \"100%\")\n"
    );

    // Held during the last hour, of type order: o-2 and o-3, one per batch.
    let run = release(&[
        "--aggregate-type",
        "order",
        "--held-after",
        "1h",
        "--batch-size",
        "1",
        "--yes",
    ]);
    assert!(run.out.contains("released 2 "), "{run:?}");
    assert_eq!(
        released(&inbox).await,
        [
            "invoice/i-1 (retry)",
            "order/o-1 (skip)",
            "order/o-2 (retry)",
            "order/o-3 (retry)"
        ]
    );
    let run = release(&["--yes"]);
    assert!(run.out.starts_with("no held aggregate"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_all_asks_on_a_terminal() {
    let test = TestDb::with_schema(Backend::Sqlite).await;
    let inbox = four_holds(&test).await;
    for (answer, code) in [("n", 3), ("y", 0)] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_outbox"));
        command
            .args(["release", "--consumer", "billing", "--all", "--skip"])
            .env("DATABASE_URL", url(&test));
        let mut session = spawn_command(command, Some(20_000)).unwrap();
        session.exp_string("4 held aggregate(s)").unwrap();
        session
            .exp_string(
                "release 4 held aggregate(s) of consumer billing (skip: leave the message each is \
                 held behind unapplied for good)? [y/N] ",
            )
            .unwrap();
        session.send_line(answer).unwrap();
        session.exp_eof().unwrap();
        match session.process().wait().unwrap() {
            WaitStatus::Exited(_, exited) => assert_eq!(exited, code, "{answer}"),
            other => panic!("ended by {other:?}"),
        }
        let expected = if answer == "n" { 0 } else { 4 };
        assert_eq!(released(&inbox).await.len(), expected, "{answer}");
    }
    assert!(
        inbox
            .holds()
            .await
            .unwrap()
            .iter()
            .all(|h| h.release == Some(Release::Skip))
    );
}

txoutbox_fixtures::each_backend!(empty: release_all_with_filters);
