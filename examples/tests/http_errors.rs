//! `HttpError` over real HTTP on PostgreSQL: an aggregate that another
//! request changes while this one works on it answers 409 once
//! `Outbox::transaction` has run out of attempts, and is saved when an
//! attempt is left.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use sea_orm::{ConnectionTrait, DatabaseConnection};
use txoutbox::axum::HttpError;
use txoutbox::sea_orm::TransactionRetry;
use txoutbox::{Outbox, OutboxConfig};
use txoutbox_examples::orders::Order;
use txoutbox_examples::orders_table;
use txoutbox_fixtures::db::{Backend, TestDb};
use txoutbox_fixtures::http;

#[derive(Clone)]
struct App {
    outbox: Outbox,
    /// Another request's connection.
    other: DatabaseConnection,
    /// Attempts the route makes.
    attempts: u32,
    /// How many of them another request gets in the way of.
    contended: Arc<AtomicU32>,
}

/// `POST /orders/{id}/pay`: while it holds the order, another request
/// changes it (`contended` times).
async fn pay(State(app): State<App>, Path(id): Path<String>) -> Result<StatusCode, HttpError> {
    let retry = TransactionRetry::on_conflict().attempts(app.attempts);
    app.outbox
        .transaction_with(retry, async |mut uow| {
            let mut order = uow
                .load::<Order>(id.clone())
                .await?
                .ok_or(HttpError::not_found(&id))?;
            let contended = app
                .contended
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if contended.is_ok() {
                let bump =
                    format!("UPDATE demo_orders SET version = version + 1 WHERE id = '{id}'");
                app.other.execute_unprepared(&bump).await?;
            }
            order.pay()?;
            uow.save(&mut order).await?;
            Ok(StatusCode::NO_CONTENT)
        })
        .await
}

async fn serve(test: &TestDb, attempts: u32, contended: u32) -> (String, Outbox) {
    let outbox = Outbox::new(test.connect_again().await, OutboxConfig::default());
    orders_table::create_table(outbox.db())
        .await
        .expect("orders table");
    let app = App {
        outbox: outbox.clone(),
        other: test.connect_again().await,
        attempts,
        contended: Arc::new(AtomicU32::new(contended)),
    };
    let router = Router::new()
        .route("/orders/{id}/pay", post(pay))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("its address").to_string();
    tokio::spawn(axum::serve(listener, router).into_future());
    (addr, outbox)
}

async fn place(outbox: &Outbox, id: &str) {
    let mut order = Order::place(id, "ada", 1250).expect("placed");
    outbox
        .repository::<Order>()
        .save(&mut order)
        .await
        .expect("saved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_that_outlives_its_attempts_answers_409() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    let (addr, outbox) = serve(&test, 1, 1).await;
    place(&outbox, "o-1").await;

    let answer = http::request(&addr, "POST", "/orders/o-1/pay", None)
        .await
        .expect("an answer");
    assert_eq!(answer.status, 409, "{answer:?}");
    assert!(answer.body.contains("order o-1"), "{answer:?}");
    assert_eq!(
        test.count("outbox_messages", "event_name = 'order.paid'")
            .await,
        0,
        "nothing of the request was committed"
    );

    let missing = http::request(&addr, "POST", "/orders/o-2/pay", None)
        .await
        .expect("an answer");
    assert_eq!(missing.status, 404, "{missing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_with_an_attempt_left_is_retried_and_saved() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    let (addr, outbox) = serve(&test, 2, 1).await;
    place(&outbox, "o-1").await;

    let answer = http::request(&addr, "POST", "/orders/o-1/pay", None)
        .await
        .expect("an answer");
    assert_eq!(answer.status, 204, "{answer:?}");
    assert_eq!(
        test.count("outbox_messages", "event_name = 'order.paid'")
            .await,
        1,
        "paid once"
    );
}
