//! `outbox stream ensure` against the machine's nats-server: creates the
//! stream, then reports that it fits or how it differs, and refuses one
//! that cannot serve the outbox; and the broker commands' errors are one
//! clear line and a non-zero exit.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

mod support;

use std::process::Command;

use async_nats::jetstream;
use serde_json::Value;
use txoutbox_fixtures::jetstream::nats_url;

/// Runs `outbox ARGS` with `NATS_URL` = `nats`; (success, stdout, stderr).
fn outbox(nats: &str, args: &[&str]) -> (bool, String, String) {
    support::run(&[("NATS_URL", Some(nats)), ("DATABASE_URL", None)], args).parts()
}

fn unique() -> String {
    uuid::Uuid::now_v7().simple().to_string()[16..].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_then_reports_fit_and_differences() {
    let tag = unique();
    let (name, subject) = (format!("E_{tag}"), format!("e{tag}.>"));
    let url = nats_url();
    let base = [
        "stream",
        "ensure",
        "--stream",
        &name,
        "--subjects",
        &subject,
        "--storage",
        "memory",
        "--max-age",
        "10m",
    ];

    let (ok, out, err) = outbox(&url, &base);
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!("created stream {name} capturing [\"{subject}\"]")),
        "{out}"
    );
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    let info = js
        .get_stream(&name)
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .clone();
    assert_eq!(info.config.subjects, std::slice::from_ref(&subject));
    assert_eq!(
        info.config.duplicate_window,
        std::time::Duration::from_secs(120)
    );

    let (ok, out, _) = outbox(&url, &base);
    assert!(
        ok && out.contains("stream exists:") && out.contains("it fits"),
        "{out}"
    );

    let mut differing = base.to_vec();
    differing.extend(["--replicas", "3", "--duplicate-window", "5m", "--json"]);
    let (ok, out, err) = outbox(&url, &differing);
    assert!(ok, "differences are reported, not fatal: {err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["created"], false);
    assert_eq!(report["replicas"], 1, "the stream is kept as it is");
    let differences: Vec<&str> = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert_eq!(
        differences,
        [
            "duplicate window is 120s, not 300s",
            "replicas are 1, not 3"
        ]
    );

    // A subject it does not capture: the outbox's messages would be refused.
    let other = format!("f{tag}.>");
    let (ok, _, err) = outbox(
        &url,
        &["stream", "ensure", "--stream", &name, "--subjects", &other],
    );
    assert!(!ok);
    assert!(
        err.starts_with(&format!(
            "outbox: stream `{name}` does not capture [\"{other}\"]"
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // A duplicate window the lease outlasts.
    let (ok, _, err) = outbox(
        &url,
        &[
            "stream",
            "ensure",
            "--stream",
            &format!("G_{tag}"),
            "--subjects",
            &format!("g{tag}.>"),
            "--duplicate-window",
            "2s",
        ],
    );
    assert!(
        !ok && err.contains("not longer than the processor's lease"),
        "{err}"
    );
    js.delete_stream(&name).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_errors_are_one_clear_line() {
    let url = nats_url();
    // No server there.
    let (ok, out, err) = outbox(
        "nats://127.0.0.1:1",
        &["stream", "ensure", "--stream", "X", "--subjects", "x.>"],
    );
    assert!(!ok && out.is_empty());
    assert!(
        err.starts_with("outbox: connecting to NATS at nats://127.0.0.1:1"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // Not a URL at all.
    let (ok, _, err) = outbox("nats://bad host:x", &["dlq", "list", "--consumer", "c"]);
    assert!(
        !ok && err.trim_end() == "outbox: `nats://bad host:x` is not a NATS server URL",
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // NATS_URL unset.
    let output = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .args(["dlq", "list", "--consumer", "c"])
        .env_remove("NATS_URL")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "outbox: set NATS_URL or --nats-url\n"
    );
    // A stream that does not exist (verify needs a database first).
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}?mode=rwc", dir.path().join("o.db").display());
    let output = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .args(["verify", "--stream", &format!("NOPE_{}", unique())])
        .env("NATS_URL", &url)
        .env("DATABASE_URL", &db)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        err.starts_with("outbox: stream `NOPE_") && err.ends_with("` does not exist\n"),
        "{err}"
    );
    // No stream captures the consumer's dead letters.
    let consumer = format!("nobody_{}", unique());
    let (ok, _, err) = outbox(&url, &["dlq", "list", "--consumer", &consumer]);
    assert!(!ok);
    assert_eq!(
        err,
        format!("outbox: no stream captures the dead-letter subject `dlq.{consumer}`\n")
    );
}
