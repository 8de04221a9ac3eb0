//! The console's bulk release of a consumer's held aggregates, through its
//! router on PostgreSQL, MariaDB and SQLite: the holds page has a checkbox
//! per hold and the "release selected / all" forms for an operator only;
//! each shows how many it releases and asks first; the `POST` needs the
//! session's token and a same-origin request, releases only what was
//! chosen (the selected holds, or all that the filter keeps), and is
//! recorded in the audit log with its count.

#![allow(clippy::unwrap_used)]

mod support;

use axum::Router;
use axum::http::StatusCode;
use support::{Answer, by_header, get};
use txoutbox_console::Console;
use txoutbox_core::MessageId;
use txoutbox_core::consumer::{HeldMessages, ParkedMessage};
use txoutbox_fixtures::holds::released;
use txoutbox_fixtures::{Backend, TestDb};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig};

/// A form `POST` as `alice` with the session cookie `token`, from `origin`.
async fn post(
    app: &Router,
    path: &str,
    token: &str,
    origin: &str,
    fields: &[(&str, &str)],
) -> Answer {
    support::post(app, path, token, origin, Some("alice"), fields).await
}

/// Holds `order/<id>` of consumer `billing` behind a message that failed
/// for `reason`; the id of that message.
async fn hold(inbox: &Inbox, aggregate_type: &str, aggregate_id: &str, reason: &str) -> String {
    let id = MessageId::new();
    let message = ParkedMessage::new(
        id,
        aggregate_type,
        aggregate_id,
        1,
        "events.order.paid",
        vec![("ce-type".to_owned(), "order.paid".to_owned())],
        b"{}".to_vec(),
        Some(reason.to_owned()),
    );
    HeldMessages::park(inbox, message).await.unwrap();
    id.to_string()
}

async fn release_selected_and_all(backend: Backend) {
    let test = TestDb::with_schema(backend).await;
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default().without_notify());
    let inbox = Inbox::new(&outbox, "billing").unwrap();
    let o1 = hold(&inbox, "order", "o-1", "rejected: card declined").await;
    let o2 = hold(&inbox, "order", "o-2", "timeout: payment service").await;
    hold(&inbox, "invoice", "i-1", "rejected: Card expired").await;
    let base = Console::builder(outbox).consumer("billing");
    let readonly = Router::new().nest(
        "/outbox",
        Console::builder(Outbox::new(
            test.db.clone(),
            OutboxConfig::default().without_notify(),
        ))
        .consumer("billing")
        .build()
        .router(),
    );
    let console = Router::new().nest("/outbox", base.authorize(by_header).build().router());

    // The forms are for an operator only.
    let page = get(&readonly, "/outbox/consumers", None).await;
    page.has("order/o-1");
    page.lacks("Release selected");
    let page = get(&console, "/outbox/consumers", Some("alice")).await;
    page.has(&format!(r#"name="hold" value="{o1}""#));
    page.has("Release selected (retry)…");
    page.has("Release all (skip)…");

    // Selected: the confirmation counts and names them.
    let many = "/outbox/consumers/billing/release-many";
    let confirm = get(
        &console,
        &format!("{many}?hold={o1}&hold={o2}&how=retry"),
        Some("alice"),
    )
    .await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body);
    confirm.has("Release 2 held aggregate(s) of consumer <code>billing</code> (2 selected)");
    confirm.has("order/o-2 held behind order.paid (0 parked behind it): timeout: payment service");
    confirm.has("Confirm release of 2 (retry)");
    let token = confirm.token();
    let selected = [
        ("csrf", token.as_str()),
        ("hold", o1.as_str()),
        ("hold", o2.as_str()),
        ("how", "retry"),
        ("confirm", "yes"),
    ];
    let refused = post(&console, many, &token, "http://evil.test", &selected).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let no_token = post(
        &console,
        many,
        &token,
        "http://console.test",
        &selected[1..],
    )
    .await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN, "{}", no_token.body);
    assert!(released(&inbox).await.is_empty(), "nothing released");
    let done = post(&console, many, &token, "http://console.test", &selected).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    done.has("2 held aggregate(s) of consumer billing released (retry)");
    assert_eq!(
        released(&inbox).await,
        ["order/o-1 (retry)", "order/o-2 (retry)"]
    );

    // All whose reason mentions a card: only i-1 is left of those.
    let confirm = get(
        &console,
        &format!("{many}?all=yes&aggregate_type=&reason=CARD&how=skip"),
        Some("alice"),
    )
    .await;
    confirm.has("Release 1 held aggregate(s)");
    confirm.has("reason containing &quot;CARD&quot;");
    let all = [
        ("csrf", token.as_str()),
        ("all", "yes"),
        ("reason", "CARD"),
        ("how", "skip"),
        ("confirm", "yes"),
    ];
    let done = post(&console, many, &token, "http://console.test", &all).await;
    done.has("1 held aggregate(s) of consumer billing released (skip)");
    assert_eq!(
        released(&inbox).await,
        [
            "invoice/i-1 (skip)",
            "order/o-1 (retry)",
            "order/o-2 (retry)"
        ]
    );
    let none = get(
        &console,
        &format!("{many}?all=yes&how=retry"),
        Some("alice"),
    )
    .await;
    none.has("No held aggregate of consumer billing left to release (every hold).");
    none.lacks("Confirm release");

    // Both in the audit log, with their counts.
    let actions = get(&console, "/outbox/actions", None).await;
    actions.has(
        "release 2 selected held aggregate(s) of consumer billing (retry): order/o-1, order/o-2",
    );
    actions.has("2 released");
    actions.has(
        "release all held aggregates of consumer billing (reason containing &quot;CARD&quot;) (skip)",
    );
    actions.has("1 released");
}

#[tokio::test]
async fn release_many_on_postgres() {
    release_selected_and_all(Backend::Postgres).await;
}

#[tokio::test]
async fn release_many_on_mariadb() {
    release_selected_and_all(Backend::MySql).await;
}

#[tokio::test]
async fn release_many_on_sqlite() {
    release_selected_and_all(Backend::Sqlite).await;
}
