//! `outbox console`: refuses an address other than loopback without
//! --allow-public; serves the console of the named database on loopback,
//! read-only unless --allow-changes, until it is stopped.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use support::{fill, outbox, url};
use txoutbox_fixtures::{Backend, TestDb};

/// One `GET path` on `addr`: the whole answer.
fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// Starts `outbox console ARGS` on `test`'s database; returns the child and
/// the address it says it listens on.
fn start(test: &TestDb, args: &[&str]) -> (std::process::Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .arg("console")
        .args(args)
        .env("DATABASE_URL", url(test))
        .env_remove("NATS_URL")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    (child, addr)
}

#[tokio::test]
async fn serves_on_loopback_only_and_read_only_by_default() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    fill(&test).await;

    let refused = outbox(&test, &["console", "--listen", "0.0.0.0:0"]);
    assert_eq!(refused.code, 2, "{}", refused.err);
    assert!(refused.err.contains("--allow-public"), "{}", refused.err);

    let (mut child, addr) = start(&test, &["--listen", "127.0.0.1:0"]);
    let overview = get(&addr, "/");
    assert!(overview.starts_with("HTTP/1.1 200"), "{overview}");
    assert!(
        overview.contains(r#"<div id="dead" class="bad"><dt>Dead</dt><dd>2</dd>"#),
        "{overview}"
    );
    assert!(
        overview.contains("Read-only: no authorisation hook"),
        "{overview}"
    );
    let health = get(&addr, "/health");
    assert!(
        health.contains("served by the `outbox` command"),
        "{health}"
    );
    child.kill().unwrap();
    child.wait().unwrap();

    let (mut child, addr) = start(
        &test,
        &[
            "--listen",
            "127.0.0.1:0",
            "--allow-changes",
            "--operator",
            "alice@ops",
        ],
    );
    let dead = get(&addr, "/dead");
    assert!(
        dead.contains("Signed in as <strong>alice@ops</strong>"),
        "{dead}"
    );
    assert!(dead.contains("Skip selected"), "{dead}");
    child.kill().unwrap();
    child.wait().unwrap();
}
