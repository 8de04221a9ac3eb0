//! The console's router against real databases (PostgreSQL, MariaDB,
//! SQLite), through `tower::ServiceExt::oneshot` as the application nests
//! it (`/outbox`): the overview shows the table's numbers; links stay under
//! the mount point; a read-only console and a refused request change
//! nothing; a change needs the session's token and a same-origin request;
//! a skip records the operator and its reason; payload fields named like
//! secrets are never shown; every answer carries the security headers.

#![allow(clippy::unwrap_used)]

mod support;

use axum::Router;
use axum::http::{StatusCode, header};
use sea_orm::ConnectionTrait;
use std::time::Duration;

use support::{Answer, by_header, get, post};
use txoutbox_console::{Console, ConsoleBuilder};
use txoutbox_core::MessageId;
use txoutbox_core::store::OutboxStore;
use txoutbox_fixtures::orders::Order;
use txoutbox_fixtures::{Backend, TestDb, complete_claimed};
use txoutbox_sea_orm::{Outbox, OutboxConfig};

fn outbox_of(test: &TestDb) -> Outbox {
    Outbox::new(test.db.clone(), OutboxConfig::default().without_notify())
}

/// The application: the console under `/outbox`, changes by `x-user`.
fn app(builder: ConsoleBuilder) -> Router {
    Router::new().nest("/outbox", builder.build().router())
}

/// Orders `o-1` (3 messages, the first dead with a card number in its
/// payload) and `o-2` (1 message).
async fn fill(test: &TestDb) -> MessageId {
    let orders = outbox_of(test).repository::<Order>();
    let mut o1 = Order::place("o-1", 100).unwrap();
    orders.save(&mut o1).await.unwrap();
    o1.amend(150).unwrap();
    o1.amend(200).unwrap();
    orders.save(&mut o1).await.unwrap();
    orders
        .save(&mut Order::place("o-2", 5).unwrap())
        .await
        .unwrap();
    let payload = r#"{"order_id":"o-1","total_cents":100,"card_number":"4111-1111-1111-1111"}"#;
    test.db
        .execute_unprepared(&format!(
            "UPDATE outbox_messages SET status = 2, attempts = 10, \
             last_error = 'payload over max_payload', payload = '{payload}' \
             WHERE aggregate_id = 'o-1' AND sequence = 1"
        ))
        .await
        .unwrap();
    let row = test
        .row("SELECT id FROM outbox_messages WHERE aggregate_id = 'o-1' AND sequence = 1")
        .await;
    MessageId::from_uuid(row.try_get("", "id").unwrap())
}

/// The session's token from a page's `Set-Cookie`.
fn token_of(answer: &Answer) -> String {
    let cookie = answer.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(cookie.contains("Path=/outbox"), "{cookie}");
    answer.token()
}

async fn dead_count(test: &TestDb) -> i64 {
    test.count("outbox_messages", "status = 2").await
}

async fn pages_show_the_table_and_changes_need_an_operator(backend: Backend) {
    let test = TestDb::with_schema(backend).await;
    let dead = fill(&test).await;
    let dead_id = dead.to_string();
    let outbox = outbox_of(&test);
    // o-2 is published (o-1 waits behind its dead head): the chart's one.
    let store = outbox.store();
    let batch = store.claim(10, Duration::from_secs(30)).await.unwrap();
    assert_eq!(batch.messages.len(), 1);
    complete_claimed(&store, &batch).await;

    // Read-only: the numbers, links under /outbox, no forms, headers.
    let readonly = app(Console::builder(outbox.clone()));
    let overview = get(&readonly, "/outbox", None).await;
    assert_eq!(overview.status, StatusCode::OK, "{}", overview.body);
    for shown in [
        r#"<div id="pending"><dt>Pending</dt><dd>2</dd>"#,
        r#"<div id="dead" class="bad"><dt>Dead</dt><dd>1</dd>"#,
        r#"<div id="delayed"><dt>Delayed</dt><dd>0</dd>"#,
        r#"href="/outbox/dead""#,
        "1 message(s) published in the last 15 minutes",
        r#"href="/outbox/console.css""#,
        "order/o-1", // a blocked aggregate
        r#"<meta http-equiv="refresh" content="10">"#,
        "Read-only: no authorisation hook",
    ] {
        overview.has(shown);
    }
    overview.lacks("<script");
    let headers = &overview.headers;
    assert!(
        headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );
    assert!(
        headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
    assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
    assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    let token = token_of(&overview);

    let list = get(&readonly, "/outbox/dead", None).await;
    list.has(&dead_id);
    list.lacks("Skip selected");
    let shown = get(&readonly, &format!("/outbox/dead/{dead_id}"), None).await;
    assert_eq!(shown.status, StatusCode::OK);
    shown.lacks("4111");
    shown.has("&lt;redacted&gt;");
    shown.has("payload over max_payload");
    let confirm = get(
        &readonly,
        &format!("/outbox/dead/confirm?action=skip&id={dead_id}"),
        None,
    )
    .await;
    assert_eq!(confirm.status, StatusCode::FORBIDDEN, "{}", confirm.body);
    let refused = post(
        &readonly,
        "/outbox/dead/skip",
        &token,
        "http://console.test",
        Some("mallory"),
        &[
            ("csrf", &token),
            ("id", &dead_id),
            ("reason", "why not"),
            ("confirm", "yes"),
        ],
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    refused.has("read-only");
    assert_eq!(dead_count(&test).await, 1, "nothing changed");

    // With the hook: forms for the operator it names, refusals otherwise.
    let console = app(Console::builder(outbox.clone()).authorize(by_header));
    let list = get(&console, "/outbox/dead", Some("alice")).await;
    list.has("Skip selected");
    list.has("Signed in as <strong>alice</strong>");
    let anonymous = get(&console, "/outbox/dead", None).await;
    anonymous.lacks("Skip selected");
    let confirm = get(
        &console,
        &format!("/outbox/dead/confirm?action=skip&id={dead_id}"),
        Some("alice"),
    )
    .await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body);
    confirm.has("2 message(s) wait behind it");
    confirm.lacks("http-equiv=\"refresh\""); // forms do not reload
    let token = token_of(&confirm);
    assert!(
        confirm
            .body
            .contains(&format!(r#"name="csrf" value="{token}""#))
    );
    let skip = [
        ("csrf", token.as_str()),
        ("id", dead_id.as_str()),
        ("reason", "bad card"),
        ("confirm", "yes"),
    ];
    for (why, token, origin, user) in [
        ("no operator", token.as_str(), "http://console.test", None),
        (
            "another site",
            token.as_str(),
            "http://evil.test",
            Some("alice"),
        ),
        (
            "another session",
            "0".repeat(64).leak() as &str,
            "http://console.test",
            Some("alice"),
        ),
    ] {
        let answer = post(&console, "/outbox/dead/skip", token, origin, user, &skip).await;
        assert_eq!(
            answer.status,
            StatusCode::FORBIDDEN,
            "{why}: {}",
            answer.body
        );
        assert_eq!(dead_count(&test).await, 1, "{why}: nothing changed");
    }
    let done = post(
        &console,
        "/outbox/dead/skip",
        &token,
        "http://console.test",
        Some("alice"),
        &skip,
    )
    .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    done.has("1 of 1 message(s) skipped by alice");
    assert_eq!(dead_count(&test).await, 0);
    let note = test
        .row("SELECT skipped_by, skip_reason FROM outbox_messages WHERE aggregate_id = 'o-1' AND sequence = 1")
        .await;
    assert_eq!(note.try_get::<String>("", "skipped_by").unwrap(), "alice");
    assert_eq!(
        note.try_get::<String>("", "skip_reason").unwrap(),
        "bad card"
    );
    let actions = get(&console, "/outbox/actions", None).await;
    assert!(
        actions.body.contains("alice") && actions.body.contains("bad card"),
        "{}",
        actions.body
    );

    // Requeue by event: none dead now, so nothing to requeue.
    let requeue = post(
        &console,
        "/outbox/dead/requeue",
        &token,
        "http://console.test",
        Some("alice"),
        &[
            ("csrf", &token),
            ("event", "test.order.placed"),
            ("confirm", "yes"),
        ],
    )
    .await;
    assert_eq!(requeue.status, StatusCode::OK, "{}", requeue.body);
    requeue.has("0 dead message(s) requeued");

    // Outside a service: the health page says so; verify has no stream.
    let health = get(&console, "/outbox/health", None).await;
    health.has("served by the `outbox` command");
    let verify = get(&console, "/outbox/verify", Some("alice")).await;
    verify.has("No stream is named");
}

#[tokio::test]
async fn pages_and_changes_on_postgres() {
    pages_show_the_table_and_changes_need_an_operator(Backend::Postgres).await;
}

#[tokio::test]
async fn pages_and_changes_on_mariadb() {
    pages_show_the_table_and_changes_need_an_operator(Backend::MySql).await;
}

#[tokio::test]
async fn pages_and_changes_on_sqlite() {
    pages_show_the_table_and_changes_need_an_operator(Backend::Sqlite).await;
}
