//! The web console in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`), driven over WebDriver with fantoccini, against
//! PostgreSQL and a private nats-server whose `max_payload` is 4 KiB:
//!
//! 1. the overview reflects a backlog the test wrote;
//! 2. a message over `max_payload` goes dead in a real processor, shows on
//!    the dead page, is refused by a read-only console, and is skipped from
//!    the page (confirmation, reason, Enter on the button): the processor
//!    then publishes what waited behind it, in order;
//! 3. a consumer aggregate held behind a message its handler rejected is
//!    released from the consumers page, and its parked messages are applied
//!    in order;
//! 4. verify runs from its page; health and recent actions show.
//!
//! Screenshots of every page are kept under the target directory
//! (`tmp/console-screenshots/`, printed). Without chromium the test is
//! skipped, except under `CI=true`, where it fails:
//! `scripts/ensure-services.sh` installs it (`OUTBOX_TEST_CHROMIUM` and
//! `OUTBOX_TEST_CHROMEDRIVER` name other binaries).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use async_nats::jetstream::{self, stream::StorageType};
use fantoccini::{Client, ClientBuilder, Locator, key::Key};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;
use std::process::{Child, Command};
use txoutbox::axum::Runtime;
use txoutbox::axum::axum::{self, Router, http::request::Parts};
use txoutbox::console::{Console, Operator};
use txoutbox_core::{HandlerError, RetryPolicy};
use txoutbox_nats::{JetStreamPublisher, StreamSpec};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig};
use txoutbox_suite::jetstream::TestStream;
use txoutbox_suite::nats::NatsServer;
use txoutbox_suite::orders::{Order, OrderAmended};
use txoutbox_suite::steps::{self, applied};
use txoutbox_suite::subscriber::{SubscriberFixture, eventually};
use txoutbox_suite::{Backend, TestDb};

/// Debian's Chromium and its driver, unless `OUTBOX_TEST_CHROMIUM` and
/// `OUTBOX_TEST_CHROMEDRIVER` name others.
fn binary(variable: &str, debian: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| debian.to_owned())
}
const WAIT: Duration = Duration::from_secs(30);
const STREAM: &str = "CONSOLE";
const PREFIX: &str = "console";

/// A headless Chromium under a chromedriver of the test's own, and where
/// its screenshots go.
struct Browser {
    client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
    shots: PathBuf,
}

impl Browser {
    /// The browser, or `None` (skipped) when chromium is not installed and
    /// this is not CI.
    async fn start() -> Option<Self> {
        let chromium = binary("OUTBOX_TEST_CHROMIUM", "/usr/bin/chromium");
        let chromedriver = binary("OUTBOX_TEST_CHROMEDRIVER", "/usr/bin/chromedriver");
        let missing: Vec<&str> = [chromium.as_str(), chromedriver.as_str()]
            .into_iter()
            .filter(|path| !Path::new(path).exists())
            .collect();
        if !missing.is_empty() {
            let what = format!(
                "{} missing: `apt-get install -y chromium chromium-driver` (scripts/ensure-services.sh does)",
                missing.join(" and ")
            );
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must run the browser tests: {what}"
            );
            eprintln!("SKIPPED: the console's browser tests: {what}");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start chromedriver");
        eventually(
            "chromedriver to listen",
            Duration::from_secs(20),
            || async {
                tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
            },
        )
        .await;
        let profile = tempfile::tempdir().expect("a profile directory");
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,1100",
        ]
        .into_iter()
        .map(str::to_owned)
        .chain([format!("--user-data-dir={}", profile.path().display())])
        .collect::<Vec<_>>();
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({ "binary": chromium, "args": args }),
        );
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a Chromium session");
        let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
        std::fs::create_dir_all(&shots).expect("the screenshot directory");
        eprintln!("console screenshots: {}", shots.display());
        Some(Self {
            client,
            driver,
            _profile: profile,
            shots,
        })
    }

    async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect(url);
    }

    /// The element `locator` finds on the page.
    async fn element(&self, locator: Locator<'_>) -> fantoccini::elements::Element {
        let what = format!("{locator:?}");
        self.client
            .find(locator)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"))
    }

    /// The text of the element `css` selects.
    async fn text(&self, css: &str) -> String {
        self.element(Locator::Css(css))
            .await
            .text()
            .await
            .expect("its text")
    }

    /// The page's visible text.
    async fn page_text(&self) -> String {
        self.text("body").await
    }

    /// Follows the link whose text is `text`.
    async fn follow(&self, text: &str) {
        self.element(Locator::LinkText(text))
            .await
            .click()
            .await
            .expect("click");
    }

    /// Clicks the element `css` selects.
    async fn press(&self, css: &str) {
        self.element(Locator::Css(css))
            .await
            .click()
            .await
            .expect("click");
    }

    /// Waits until the page's text holds `text` (read again while the
    /// browser is still between pages).
    async fn shows(&self, text: &str) {
        eventually(text, WAIT, || async {
            let body = self.client.find(Locator::Css("body")).await;
            match body {
                Ok(body) => body.text().await.is_ok_and(|t| t.contains(text)),
                Err(_) => false,
            }
        })
        .await;
    }

    /// Saves a screenshot of the page as `<name>.png`.
    async fn shot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("a screenshot");
        std::fs::write(self.shots.join(format!("{name}.png")), png).expect("save the screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Serves `app` on a free loopback port.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Orders `b-1`..`b-5` (one message each) and `poisoned` (placed, amended
/// twice); the first message of `poisoned` is made larger than the server
/// takes.
async fn write_backlog(test: &TestDb, outbox: &Outbox) {
    let orders = outbox.repository::<Order>();
    for i in 1..=5 {
        let mut order = Order::place(format!("b-{i}"), i).unwrap();
        orders.save(&mut order).await.unwrap();
    }
    let mut poisoned = Order::place("poisoned", 1).unwrap();
    orders.save(&mut poisoned).await.unwrap();
    poisoned.amend(2).unwrap();
    poisoned.amend(3).unwrap();
    orders.save(&mut poisoned).await.unwrap();
    let attachment = "x".repeat(8 * 1024);
    test.db
        .execute_unprepared(&format!(
            "UPDATE outbox_messages SET payload = '{{\"order_id\":\"poisoned\",\"total_cents\":1,\
             \"attachment\":\"{attachment}\",\"card_token\":\"tok-secret-1\"}}' \
             WHERE aggregate_id = 'poisoned' AND sequence = 1"
        ))
        .await
        .unwrap();
}

use sea_orm::ConnectionTrait;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_in_a_real_browser() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let server = NatsServer::builder()
        .config("max_payload: 4096")
        .start()
        .await
        .expect("a private nats-server");
    let client = server.connect().await.expect("a client");
    let js = jetstream::new(client.clone());
    StreamSpec::new(STREAM, [format!("{PREFIX}.>")])
        .storage(StorageType::Memory)
        .processor_lease(Duration::from_secs(30))
        .ensure(&js)
        .await
        .expect("the outbox's stream");
    let stream = TestStream {
        jetstream: js.clone(),
        name: STREAM.to_owned(),
        prefix: PREFIX.to_owned(),
    };
    let test = TestDb::with_schema(Backend::Postgres).await;
    steps::create_table(&test).await;
    let outbox = Outbox::new(
        test.db.clone(),
        OutboxConfig::default().with_subject_prefix(PREFIX).unwrap(),
    );

    // 1. A backlog, before anything publishes, on a console served outside
    // the service (as `outbox console` serves it).
    write_backlog(&test, &outbox).await;
    let outside =
        serve(Router::new().nest("/outbox", Console::builder(outbox.clone()).build().router()))
            .await;
    browser.goto(&format!("http://{outside}/outbox")).await;
    assert_eq!(browser.text("#pending dd").await, "8");
    assert_eq!(browser.text("#dead dd").await, "0");
    assert!(
        browser
            .text("#by-event")
            .await
            .contains("test.order.amended 2 0")
    );
    browser.shot("overview-backlog").await;
    browser.follow("Health").await;
    assert!(
        browser
            .page_text()
            .await
            .contains("served by the `outbox` command")
    );
    browser.shot("health-outside-the-service").await;

    // The service: a processor, and a subscriber whose handler rejects
    // total 2 until fixed.
    let fixture = SubscriberFixture::new(client.clone(), StorageType::Memory).await;
    let inbox = Inbox::new(&outbox, fixture.durable.clone()).unwrap();
    let fixed = Arc::new(AtomicBool::new(false));
    let position = Arc::new(AtomicI64::new(0));
    let handler = {
        let (fixed, position) = (fixed.clone(), position.clone());
        inbox.handler_boxed(move |event: OrderAmended, delivery, uow| {
            let (fixed, position) = (fixed.clone(), position.clone());
            Box::pin(async move {
                if event.total_cents == 2 && !fixed.load(Ordering::SeqCst) {
                    return Err(HandlerError::permanent("total 2 is refused"));
                }
                let at = position.fetch_add(1, Ordering::SeqCst);
                steps::record(uow, delivery.aggregate_id(), event.total_cents, at).await
            })
        })
    };
    let runtime = Runtime::builder()
        .processor(
            outbox
                .processor(JetStreamPublisher::new(client.clone(), "/console-test"))
                .retry(RetryPolicy::new(
                    2,
                    Duration::from_millis(50),
                    Duration::from_millis(200),
                ))
                .poll_interval(Duration::from_millis(100)),
        )
        .subscriber(fixture.subscriber().on(handler))
        .handle_signals(false)
        .start()
        .await
        .expect("the runtime starts");
    let alice = |_: &Parts| Some(Operator::new("alice@ops"));
    let console = runtime
        .console(
            Console::builder(outbox.clone())
                .nats(js.clone())
                .stream(STREAM),
        )
        .authorize(alice)
        .build();
    let readonly = Console::builder(outbox.clone())
        .nats(js.clone())
        .stream(STREAM)
        .consumer_on(&fixture.stream, &fixture.durable)
        .build();
    let app = Router::new()
        .nest("/outbox", console.router())
        .nest("/readonly", readonly.router());
    let addr = serve(app).await;
    let base = format!("http://{addr}/outbox");

    // 2. The poison goes dead; the others are published.
    let poison = "aggregate_id = 'poisoned' AND sequence = 1";
    eventually("the poison to go dead", WAIT, || async {
        test.count("outbox_messages", &format!("{poison} AND status = 2"))
            .await
            == 1
    })
    .await;
    eventually("b-1..b-5 published", WAIT, || async {
        test.count("outbox_messages", "status = 1").await == 5
    })
    .await;
    let dead_id: uuid::Uuid = test
        .row(&format!("SELECT id FROM outbox_messages WHERE {poison}"))
        .await
        .try_get("", "id")
        .unwrap();
    browser.goto(&base).await;
    assert_eq!(browser.text("#dead dd").await, "1");
    assert!(
        browser
            .text("#blocked-aggregates")
            .await
            .contains("order/poisoned")
    );
    browser.shot("overview").await;

    // A read-only console shows it and refuses to touch it.
    browser.goto(&format!("http://{addr}/readonly/dead")).await;
    assert!(browser.page_text().await.contains(&dead_id.to_string()));
    assert!(
        browser
            .client
            .find(Locator::LinkText("Skip…"))
            .await
            .is_err()
    );
    browser
        .goto(&format!(
            "http://{addr}/readonly/dead/confirm?action=skip&id={dead_id}"
        ))
        .await;
    assert!(
        browser
            .page_text()
            .await
            .contains("This console is read-only")
    );
    browser.shot("refused").await;
    // A form forged on one of its own pages (the page itself has no form)
    // is refused too.
    browser.goto(&format!("http://{addr}/readonly/dead")).await;
    assert!(
        !browser
            .page_text()
            .await
            .contains("This console is read-only")
    );
    browser
        .client
        .execute(
            "const f = document.createElement('form'); f.method = 'post'; \
             f.action = arguments[0]; \
             for (const [k, v] of [['id', arguments[1]], ['reason', 'forged'], ['csrf', '0'.repeat(64)]]) { \
               const i = document.createElement('input'); i.name = k; i.value = v; f.appendChild(i); } \
             document.body.appendChild(f); f.submit();",
            vec![json!("/readonly/dead/skip"), json!(dead_id.to_string())],
        )
        .await
        .expect("submit the forged form");
    browser.shows("This console is read-only").await;
    assert_eq!(
        test.count("outbox_messages", &format!("{poison} AND status = 2"))
            .await,
        1,
        "still dead"
    );

    // Skipped from the page, with a reason, the button pressed by keyboard.
    browser.goto(&format!("{base}/dead")).await;
    browser.shot("dead").await;
    browser.press(&format!("a[href$='/dead/{dead_id}']")).await;
    let payload = browser.text("#payload").await;
    assert!(
        payload.contains("<redacted>") && !payload.contains("tok-secret-1"),
        "{payload}"
    );
    assert!(browser.text("#last-error").await.contains("payload"));
    browser.shot("dead-message").await;
    browser.follow("Skip…").await;
    assert!(
        browser
            .text("#confirm-summary")
            .await
            .contains("Skip 1 dead message(s)?")
    );
    browser
        .element(Locator::Id("reason"))
        .await
        .send_keys("attachment over max_payload, resent by hand")
        .await
        .expect("type the reason");
    browser.shot("confirm-skip").await;
    browser
        .element(Locator::Id("confirm"))
        .await
        .send_keys(&Key::Enter)
        .await
        .expect("press Enter on the button");
    browser.shows("skipped by alice@ops").await;
    // The aggregate moves: what waited is published, in order.
    eventually("poisoned #2 and #3 published", WAIT, || async {
        test.count(
            "outbox_messages",
            "aggregate_id = 'poisoned' AND status = 1 AND skipped_at IS NULL",
        )
        .await
            == 2
    })
    .await;
    let published: Vec<u64> = stream
        .messages()
        .await
        .into_iter()
        .filter(|(_, m)| m.aggregate_id == "poisoned")
        .map(|(_, m)| m.sequence)
        .collect();
    assert_eq!(published, [2, 3], "in order, after the skip");
    let note = test
        .row(&format!(
            "SELECT skipped_by, skip_reason FROM outbox_messages WHERE {poison}"
        ))
        .await;
    assert_eq!(
        note.try_get::<String>("", "skipped_by").unwrap(),
        "alice@ops"
    );
    browser.goto(&base).await;
    assert_eq!(browser.text("#dead dd").await, "0");
    assert_eq!(browser.text("#skipped dd").await, "1");

    // 3. A consumer aggregate held behind a rejected message.
    for total in 1..=4 {
        let message = fixture.message(
            &OrderAmended {
                order_id: "A".into(),
                total_cents: total,
            },
            "A",
            total as u64,
        );
        fixture.publish(&message).await;
    }
    eventually("A held with 2 parked", WAIT, || async {
        inbox
            .holds()
            .await
            .unwrap()
            .iter()
            .any(|h| h.aggregate_id == "A" && h.waiting == 2)
    })
    .await;
    assert_eq!(applied(&test, "A").await, [1]);
    browser.goto(&format!("{base}/consumers")).await;
    let page = browser.page_text().await;
    assert!(
        page.contains("order/A") && page.contains("total 2 is refused"),
        "{page}"
    );
    assert!(page.contains("Lag (undelivered)"), "{page}");
    browser.shot("consumers").await;
    fixed.store(true, Ordering::SeqCst);
    browser.follow("Retry…").await;
    assert!(browser.text("#confirm-summary").await.contains("order/A"));
    browser.shot("confirm-release").await;
    browser.press("#confirm").await;
    browser.shows("released (retry)").await;
    eventually("A applied in order", WAIT, || async {
        applied(&test, "A").await == [1, 2, 3, 4]
    })
    .await;

    // 4. Verify, health, recent actions.
    browser.goto(&format!("{base}/verify")).await;
    browser.press("#run-verify").await;
    eventually("verify's result", WAIT, || async {
        browser
            .client
            .find(Locator::Id("verify-result"))
            .await
            .is_ok()
    })
    .await;
    let verdict = browser.text("#verify-result").await;
    assert!(verdict.contains("Clean"), "{}", browser.page_text().await);
    browser.shot("verify").await;
    browser.goto(&format!("{base}/health")).await;
    let health = browser.page_text().await;
    assert!(
        health.contains(&fixture.durable) && health.contains("Processor"),
        "{health}"
    );
    browser.shot("health").await;
    browser.goto(&format!("{base}/actions")).await;
    let actions = browser.text("#actions").await;
    assert!(
        actions.contains("alice@ops") && actions.contains("release order/A"),
        "{actions}"
    );
    browser.shot("actions").await;

    browser
        .client
        .clone()
        .close()
        .await
        .expect("close the browser");
    runtime.shutdown().await.expect("a clean shutdown");
    fixture.delete().await;
}
