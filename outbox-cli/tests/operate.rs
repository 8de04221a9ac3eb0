//! The `outbox` command against PostgreSQL, MariaDB and SQLite: status
//! numbers match the table; dead show, skip and requeue unblock the right
//! aggregate and nothing else (after a skip, a claim publishes what waited,
//! in order); aggregate names what blocks; purge removes only what it
//! should; errors are one line and a non-zero exit.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{days_ago, execute, fill, id_of, json, outbox, outbox_of};
use txoutbox_core::store::{OutboxAdmin, OutboxStore};
use txoutbox_fixtures::{Backend, TestDb, claimed_positions, complete_claimed};

async fn skip_requeue_and_purge(backend: Backend) {
    let test = TestDb::with_schema(backend).await;
    fill(&test).await;
    let store = outbox_of(&test).store();
    let dead_o1 = id_of(&test, "o-1", 1).await;
    let dead_o3 = id_of(&test, "o-3", 1).await;

    // Status: the numbers of the table.
    let status = json(&test, &["status"]);
    assert_eq!(
        status["pending"],
        test.count("outbox_messages", "status = 0").await
    );
    assert_eq!(status["pending"], 4);
    assert_eq!(status["dead"], 2);
    assert_eq!(status["skipped"], 0);
    assert_eq!(status["delayed"], 0);
    assert_eq!(status["blocked_aggregates"], 2, "o-1 and o-3: {status}");
    assert_eq!(status["by_aggregate_type"][0]["aggregate_type"], "order");
    assert_eq!(status["by_aggregate_type"][0]["pending"], 4);
    assert_eq!(status["by_aggregate_type"][0]["dead"], 2);
    let blocked = status["blocked"].as_array().unwrap();
    assert_eq!(blocked.len(), 2, "{status}");
    let waiting = |id: &str| {
        blocked
            .iter()
            .find(|b| b["aggregate_id"] == id)
            .map(|b| b["waiting"].clone())
    };
    assert_eq!(waiting("o-1"), Some(Value::from(2)));
    assert_eq!(waiting("o-3"), Some(Value::from(1)));
    let text = outbox(&test, &["status"]);
    assert!(text.out.contains("dead     2"), "{}", text.out);
    assert!(text.out.contains("blocked  2 "), "{}", text.out);
    assert!(
        text.out.contains("order/o-1  2 waiting behind #1"),
        "{}",
        text.out
    );

    // Show: the envelope, the payload as JSON, the error, what waits.
    let shown = json(&test, &["dead", "show", &dead_o1.to_string()]);
    assert_eq!(shown["aggregate_id"], "o-1");
    assert_eq!(shown["sequence"], 1);
    assert_eq!(shown["state"]["state"], "dead");
    assert_eq!(shown["last_error"], "payload over max_payload");
    assert!(shown["payload"].is_object(), "{shown}");
    assert_eq!(shown["waiting_behind"], 2);
    assert_eq!(shown["behind"][0]["sequence"], 2);
    let text = outbox(&test, &["dead", "show", &dead_o1.to_string()]);
    assert!(
        text.out.contains("payload\n  {\n"),
        "pretty JSON: {}",
        text.out
    );
    assert!(text.out.contains("waiting behind it: 2"), "{}", text.out);

    // Skip refuses without --yes and no terminal: nothing changes.
    let refused = outbox(&test, &["dead", "skip", &dead_o1.to_string()]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.err.contains("without --yes"), "{}", refused.err);
    assert_eq!(test.count("outbox_messages", "status = 2").await, 2);

    // Skip: o-1 is released, o-3 still blocked.
    let skipped = outbox(
        &test,
        &[
            "dead",
            "skip",
            &dead_o1.to_string(),
            "--reason",
            "oversized, resent by hand",
            "--by",
            "alice@ops",
            "--yes",
        ],
    );
    assert_eq!(skipped.code, 0, "{skipped:?}");
    assert!(
        skipped
            .out
            .contains("2 message(s) behind it will be published"),
        "{}",
        skipped.out
    );
    let status = json(&test, &["status"]);
    assert_eq!(status["dead"], 1);
    assert_eq!(status["skipped"], 1);
    assert_eq!(status["blocked"].as_array().unwrap().len(), 1);
    assert_eq!(status["blocked"][0]["aggregate_id"], "o-3");
    let listed = json(&test, &["dead", "list", "--skipped"]);
    assert_eq!(listed[0]["id"], dead_o1.to_string());
    assert_eq!(listed[0]["state"]["by"], "alice@ops");
    assert_eq!(listed[0]["state"]["reason"], "oversized, resent by hand");

    // A claim now publishes o-1's waiting messages, in order, and o-2's;
    // nothing of o-3.
    let batch = store.claim(100, Duration::from_secs(30)).await.unwrap();
    assert_eq!(
        claimed_positions(&batch),
        vec![
            ("o-1".to_owned(), 2),
            ("o-1".to_owned(), 3),
            ("o-2".to_owned(), 1)
        ]
    );
    // What blocks o-1 now is the claim's lease; o-3 its dead head.
    let o1 = json(&test, &["aggregate", "order", "o-1"]);
    assert_eq!(o1["blocked_by"]["state"]["state"], "leased");
    assert_eq!(o1["unsettled"], 2);
    assert_eq!(o1["last_settled"], 1, "the skipped message is settled");
    let o3 = json(&test, &["aggregate", "order", "o-3"]);
    assert_eq!(o3["blocked_by"]["id"], dead_o3.to_string());
    assert_eq!(o3["blocked_by"]["state"]["state"], "dead");
    assert_eq!(o3["messages"][1]["sequence"], 2);
    complete_claimed(&store, &batch).await;

    // Skipping a message that is not dead, or unknown, fails clearly.
    let not_dead = outbox(
        &test,
        &[
            "dead",
            "skip",
            &id_of(&test, "o-3", 2).await.to_string(),
            "--yes",
        ],
    );
    assert_eq!(not_dead.code, 1);
    assert!(
        not_dead.err.contains("is not dead (it is pending)"),
        "{}",
        not_dead.err
    );

    // Requeue o-3's head by id: the claim takes o-3 in order.
    let requeued = outbox(&test, &["dead", "requeue", &dead_o3.to_string(), "--yes"]);
    assert!(requeued.out.contains("requeued 1"), "{requeued:?}");
    let batch = store.claim(100, Duration::from_secs(30)).await.unwrap();
    assert_eq!(
        claimed_positions(&batch),
        vec![("o-3".to_owned(), 1), ("o-3".to_owned(), 2)]
    );

    // Purge: published rows settled 10 days ago go (the skipped one with
    // them once it is that old); recent ones, pending and dead stay.
    execute(
        &test,
        &format!(
            "UPDATE outbox_messages SET published_at = {} WHERE aggregate_id = 'o-1'",
            days_ago(backend, 10)
        ),
    )
    .await;
    let purged = outbox(&test, &["purge", "--published-before", "7d", "--yes"]);
    assert_eq!(purged.code, 0, "{purged:?}");
    assert!(purged.out.contains("removed 3 messages"), "{}", purged.out);
    assert_eq!(
        test.count("outbox_messages", "aggregate_id = 'o-1'").await,
        0
    );
    assert_eq!(
        test.count("outbox_messages", "aggregate_id = 'o-2'").await,
        1
    );
    assert_eq!(
        test.count("outbox_messages", "aggregate_id = 'o-3'").await,
        2
    );
    let again = outbox(&test, &["purge", "--published-before", "7d", "--yes"]);
    assert!(again.out.contains("nothing to purge"), "{again:?}");
}

/// `purge inbox` removes one consumer's old records only.
async fn purges_a_consumers_inbox(backend: Backend) {
    let test = TestDb::with_schema(backend).await;
    fill(&test).await;
    let outbox_handle = outbox_of(&test);
    outbox_handle
        .store()
        .requeue_dead(txoutbox_core::store::DeadSelector::All)
        .await
        .unwrap();
    let batch = outbox_handle
        .store()
        .claim(100, Duration::from_secs(30))
        .await
        .unwrap();
    for consumer in ["billing", "shipping"] {
        let inbox = txoutbox_sea_orm::Inbox::new(&outbox_handle, consumer).unwrap();
        for claimed in &batch.messages {
            inbox
                .process(
                    (),
                    txoutbox_core::Delivery::new(claimed.message.clone()),
                    |_, _, _| Box::pin(async { Ok(()) }),
                )
                .await
                .unwrap();
        }
    }
    assert_eq!(batch.messages.len(), 6);
    // o-1's three records are old, for both consumers.
    execute(
        &test,
        &format!(
            "UPDATE outbox_inbox SET processed_at = {} WHERE message_id IN \
             (SELECT id FROM outbox_messages WHERE aggregate_id = 'o-1')",
            days_ago(backend, 3)
        ),
    )
    .await;
    let purged = outbox(
        &test,
        &[
            "purge",
            "inbox",
            "--consumer",
            "billing",
            "--before",
            "1d",
            "--yes",
        ],
    );
    assert_eq!(purged.code, 0, "{purged:?}");
    assert!(
        purged.out.contains("removed 3 inbox records"),
        "{}",
        purged.out
    );
    assert_eq!(test.count("outbox_inbox", "consumer = 'billing'").await, 3);
    assert_eq!(test.count("outbox_inbox", "consumer = 'shipping'").await, 6);
}

/// Unknown ids, missing tables: one line, exit 1.
async fn errors_are_one_line(backend: Backend) {
    let test = TestDb::with_schema(backend).await;
    let unknown = txoutbox_core::MessageId::new().to_string();
    for args in [
        vec!["dead", "show", unknown.as_str()],
        vec!["dead", "skip", unknown.as_str(), "--yes"],
        vec!["dead", "requeue", unknown.as_str(), "--yes"],
    ] {
        let run = outbox(&test, &args);
        assert_eq!(run.code, 1, "{args:?}: {run:?}");
        assert_eq!(
            run.err,
            format!("outbox: no message {unknown} in table outbox_messages\n")
        );
    }
    let run = outbox(&test, &["--table", "missing_outbox", "status"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.err,
        "outbox: table missing_outbox does not exist: create it with `outbox migrate`, or name \
         yours with --table / --inbox-table\n"
    );
    let run = outbox(
        &test,
        &["--inbox-table", "missing_inbox", "holds", "--consumer", "c"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.err
            .starts_with("outbox: table missing_inbox_held does not exist"),
        "{run:?}"
    );
}

/// `migrate` creates the tables on an empty database, then has nothing to do.
async fn migrates_once(backend: Backend) {
    let test = TestDb::new(backend).await;
    let first = outbox(&test, &["migrate"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(
        first.out.starts_with("applied 8 migration(s)"),
        "{}",
        first.out
    );
    assert!(
        first
            .out
            .contains("m20261125_000006_skipped_outbox_messages")
    );
    let second = outbox(&test, &["migrate"]);
    assert_eq!(second.code, 0, "{second:?}");
    assert!(second.out.starts_with("up to date"), "{}", second.out);
    let status = json(&test, &["status"]);
    assert_eq!(status["pending"], 0);
}

txoutbox_fixtures::each_backend!(empty:
    skip_requeue_and_purge,
    purges_a_consumers_inbox,
    errors_are_one_line,
    migrates_once
);
