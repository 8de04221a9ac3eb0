//! What the `outbox` command's tests share: running the binary on a test
//! database, and a database filled with a known situation.

#![allow(dead_code, unreachable_pub)] // each test binary uses its own part

use std::process::Command;

use sea_orm::ConnectionTrait;
use serde_json::Value;
use txoutbox_core::MessageId;
use txoutbox_fixtures::orders::Order;
use txoutbox_fixtures::{Backend, TestDb};
use txoutbox_sea_orm::{Outbox, OutboxConfig};

/// What one run of the command did.
#[derive(Debug)]
pub struct Run {
    /// Its exit code.
    pub code: i32,
    /// Its stdout.
    pub out: String,
    /// Its stderr.
    pub err: String,
}

/// The URL another process reaches `test`'s database at (on PostgreSQL
/// with the test's schema on its search path).
pub fn url(test: &TestDb) -> String {
    match test.location() {
        (url, Some(schema)) => format!("{url}?options=-csearch_path%3D{schema}"),
        (url, None) => url,
    }
}

/// Runs `outbox ARGS` on `test`'s database, stdin closed (no terminal).
pub fn outbox(test: &TestDb, args: &[&str]) -> Run {
    run(&[("DATABASE_URL", Some(&url(test)))], args)
}

/// Runs `outbox ARGS` with `env` (a `None` value removes the variable),
/// stdin closed (no terminal).
pub fn run(env: &[(&str, Option<&str>)], args: &[&str]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_outbox"));
    command.args(args);
    for (name, value) in env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let output = command.output().expect("run outbox");
    Run {
        code: output.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&output.stdout).into_owned(),
        err: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

impl Run {
    /// (whether it succeeded, stdout, stderr).
    pub fn parts(self) -> (bool, String, String) {
        (self.code == 0, self.out, self.err)
    }
}

/// `outbox ARGS --json`, which must succeed, parsed.
pub fn json(test: &TestDb, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let run = outbox(test, &args);
    assert_eq!(run.code, 0, "outbox {args:?} failed: {}", run.err);
    serde_json::from_str(&run.out).unwrap_or_else(|e| panic!("{e}: {}", run.out))
}

/// An SQL expression for `days` days ago, in the time columns' format.
pub fn days_ago(backend: Backend, days: u32) -> String {
    match backend {
        Backend::Postgres => format!("now() - interval '{days} days'"),
        Backend::MySql => format!("UTC_TIMESTAMP(6) - INTERVAL {days} DAY"),
        Backend::Sqlite => format!("strftime('%Y-%m-%d %H:%M:%f', 'now', '-{days} days')"),
    }
}

/// Runs `sql` on `test`'s database.
pub async fn execute(test: &TestDb, sql: &str) {
    test.db.execute_unprepared(sql).await.expect(sql);
}

/// The id of `aggregate_id`'s message `sequence` (of type `order`).
pub async fn id_of(test: &TestDb, aggregate_id: &str, sequence: u64) -> MessageId {
    let row = test
        .db
        .query_one_raw(sea_orm::Statement::from_string(
            test.db_backend(),
            format!(
                "SELECT id FROM outbox_messages WHERE aggregate_id = '{aggregate_id}' \
                 AND sequence = {sequence}"
            ),
        ))
        .await
        .expect("select id")
        .expect("the message exists");
    MessageId::from_uuid(row.try_get("", "id").expect("id"))
}

/// The outbox on `test`'s database.
pub fn outbox_of(test: &TestDb) -> Outbox {
    Outbox::new(test.db.clone(), OutboxConfig::default().without_notify())
}

/// Orders `o-1` (3 messages), `o-2` (1) and `o-3` (2): o-1's first message
/// is dead (payload over max_payload, 10 attempts), so its two amendments
/// wait behind it; o-3's first is dead too (no stream), one waits; o-2's
/// only message is free.
pub async fn fill(test: &TestDb) {
    let orders = outbox_of(test).repository::<Order>();
    let mut o1 = Order::place("o-1", 100).expect("place");
    orders.save(&mut o1).await.expect("save");
    o1.amend(150).expect("amend");
    o1.amend(200).expect("amend");
    orders.save(&mut o1).await.expect("save");
    orders
        .save(&mut Order::place("o-2", 5).expect("place"))
        .await
        .expect("save");
    let mut o3 = Order::place("o-3", 7).expect("place");
    orders.save(&mut o3).await.expect("save");
    o3.amend(8).expect("amend");
    orders.save(&mut o3).await.expect("save");
    execute(
        test,
        "UPDATE outbox_messages SET status = 2, attempts = 10, \
         last_error = 'payload over max_payload' WHERE aggregate_id = 'o-1' AND sequence = 1",
    )
    .await;
    execute(
        test,
        "UPDATE outbox_messages SET status = 2, attempts = 3, \
         last_error = 'no stream for subject' WHERE aggregate_id = 'o-3' AND sequence = 1",
    )
    .await;
}
