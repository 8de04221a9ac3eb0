//! `outbox dlq` against a real subscriber on the machine's nats-server: a
//! handler rejects a message, the subscriber dead-letters it, the operator
//! lists and shows it, fixes the handler and replays it; the handler then
//! receives it with a new id and a link to the original.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use txoutbox_core::{Delivery, HandlerError};
use txoutbox_fixtures::jetstream::nats_url;
use txoutbox_fixtures::orders::OrderPlaced;
use txoutbox_fixtures::subscriber::{SubscriberFixture, eventually};

fn outbox(args: &[&str]) -> (bool, String, String) {
    let nats = nats_url();
    support::run(&[("NATS_URL", Some(&nats)), ("DATABASE_URL", None)], args).parts()
}

fn json(args: &[&str]) -> Value {
    let (ok, out, err) = outbox(args);
    assert!(ok, "outbox {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// What the handler saw: (message id, `Outbox-Replay-Of`, total).
type Seen = Arc<Mutex<Vec<(String, Option<String>, i64)>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_and_replay_a_dead_letter() {
    let fx = SubscriberFixture::shared().await;
    let seen: Seen = Arc::default();
    let fixed = Arc::new(Mutex::new(false));
    let (handler_seen, handler_fixed) = (Arc::clone(&seen), Arc::clone(&fixed));
    let running = fx
        .subscriber()
        .unordered()
        .on(move |event: OrderPlaced, delivery: Delivery| {
            let (seen, fixed) = (Arc::clone(&handler_seen), Arc::clone(&handler_fixed));
            async move {
                if event.total_cents < 0 && !*fixed.lock().unwrap() {
                    return Err(HandlerError::permanent("a negative total"));
                }
                seen.lock().unwrap().push((
                    delivery.message_id().to_string(),
                    delivery
                        .headers()
                        .get("Outbox-Replay-Of")
                        .map(str::to_owned),
                    event.total_cents,
                ));
                Ok(())
            }
        })
        .build()
        .await
        .unwrap()
        .spawn();
    let good = fx.message(
        &OrderPlaced {
            order_id: "o-1".into(),
            total_cents: 10,
        },
        "o-1",
        1,
    );
    let bad = fx.message(
        &OrderPlaced {
            order_id: "o-2".into(),
            total_cents: -5,
        },
        "o-2",
        1,
    );
    fx.publish(&good).await;
    fx.publish(&bad).await;
    let dead = fx.dead_letters(1).await;
    let dead_seq = dead[0].sequence;
    let seq_text = dead_seq.to_string();

    let list = json(&["dlq", "list", "--consumer", &fx.durable, "--json"]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["sequence"], dead_seq);
    assert_eq!(list[0]["id"], bad.id.to_string());
    assert_eq!(list[0]["event"], "test.order.placed");
    assert_eq!(list[0]["kind"], "rejected");
    assert_eq!(list[0]["subject"], bad.subject);
    assert_eq!(list[0]["consumer"], fx.durable);
    assert!(
        list[0]["reason"]
            .as_str()
            .unwrap()
            .contains("a negative total"),
        "{list:?}"
    );
    let (ok, text, _) = outbox(&["dlq", "list", "--consumer", &fx.durable]);
    assert!(
        ok && text.contains("rejected") && text.contains("a negative total"),
        "{text}"
    );

    let shown = json(&[
        "dlq",
        "show",
        "--consumer",
        &fx.durable,
        &seq_text,
        "--json",
    ]);
    assert_eq!(shown["subject"], bad.subject);
    let payload: Value = serde_json::from_str(shown["payload"].as_str().unwrap()).unwrap();
    assert_eq!(payload["total_cents"], -5);
    let headers = shown["headers"].as_array().unwrap();
    assert!(
        headers
            .iter()
            .any(|h| h[0] == "Outbox-Dead-Kind" && h[1] == "rejected"),
        "{headers:?}"
    );
    let (ok, text, _) = outbox(&["dlq", "show", "--consumer", &fx.durable, &seq_text]);
    assert!(ok, "{text}");
    assert!(text.contains("kind      rejected\n"), "{text}");
    assert!(
        text.contains("reason    ") && text.contains("a negative total"),
        "{text}"
    );
    assert!(text.contains(&format!("id        {}\n", bad.id)), "{text}");
    assert!(
        text.contains(&format!("subject   {}", bad.subject)),
        "{text}"
    );
    assert!(text.contains("\"total_cents\":-5"), "{text}");

    // Unknown sequences are one clear error.
    let (ok, _, err) = outbox(&["dlq", "show", "--consumer", &fx.durable, "999999"]);
    assert!(!ok);
    assert_eq!(
        err,
        format!(
            "outbox: stream `{}` has no message at sequence 999999\n",
            fx.dead_letters
        )
    );

    // Replay is a change: without a terminal to ask on, it needs --yes.
    let (ok, _, err) = outbox(&["dlq", "replay", "--consumer", &fx.durable, &seq_text]);
    assert!(
        !ok && err.contains("goes back to") && err.contains("without --yes"),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(seen.lock().unwrap().len(), 1, "only the good one so far");

    // The handler is fixed; the dead letter goes back to its subject.
    *fixed.lock().unwrap() = true;
    let replayed = json(&[
        "dlq",
        "replay",
        "--consumer",
        &fx.durable,
        &seq_text,
        "--yes",
        "--json",
    ]);
    let replayed = &replayed.as_array().unwrap()[0];
    assert_eq!(replayed["subject"], bad.subject);
    assert_eq!(replayed["replay_of"], bad.id.to_string());
    assert_eq!(replayed["stream"], fx.stream);
    let new_id = replayed["id"].as_str().unwrap().to_owned();
    assert_ne!(new_id, bad.id.to_string());
    eventually(
        "the replayed message handled",
        Duration::from_secs(10),
        || async { seen.lock().unwrap().len() == 2 },
    )
    .await;
    let handled = seen.lock().unwrap()[1].clone();
    assert_eq!(handled, (new_id, Some(bad.id.to_string()), -5));
    running.shutdown().await.unwrap();
    fx.delete().await;
}
