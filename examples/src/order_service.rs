//! The `axum_service` example's service: an axum app that takes orders and
//! keeps a read model of them through the outbox, in one process.
//!
//! - `POST /orders` (`{"customer": "ada", "total_cents": 1250}`) places an
//!   [`Order`] and saves it through the outbox repository: the order row and
//!   its `order.placed` event commit together; `201 {"id": ..}`.
//! - `POST /orders/{id}/pay` loads it, pays it, saves it (`order.paid`).
//! - A subscriber in the same service applies both events to the
//!   [`VIEW_TABLE`] read model through the inbox (once each, in order per
//!   order); `GET /orders/{id}` reads it (404 until the event is applied).
//! - The [`Runtime`] owns the processor and the subscriber, and serves
//!   `/health/live`, `/health/ready`, `/health/outbox` and `/metrics`.
//!
//! Every value that reaches SQL is bound as a parameter (`sea_query`),
//! never formatted into the statement.

use std::error::Error;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use sea_orm::sea_query::{Expr, ExprTrait, Query};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr};
use serde::{Deserialize, Serialize};
use txoutbox::axum::Runtime;
use txoutbox::nats::subscriber::SubscriberBuilder;
use txoutbox::sea_orm::migration::{MigratorTrait, OutboxMigrator};
use txoutbox::{
    Delivery, HandlerError, Inbox, JetStreamPublisher, Outbox, OutboxConfig, StreamSpec,
    Subscriber, UnitOfWork,
};

use crate::orders::{Order, OrderError, OrderPaid, OrderPlaced, OrderStatus};
use crate::orders_table;

/// The database the example uses without `DATABASE_URL`.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The NATS server it uses without `NATS_URL`.
pub const DEFAULT_NATS_URL: &str = "127.0.0.1:4222";

/// The read model's table: one row per order, as the subscriber applied it.
pub const VIEW_TABLE: &str = "order_service_views";

/// The names the service gives its subjects, stream and consumer (its own:
/// the other examples use `shop` and `examples`).
#[derive(Debug, Clone)]
pub struct ServiceNames {
    /// The subject prefix of its events (`<prefix>.order.placed`).
    pub prefix: String,
    /// The stream capturing `<prefix>.>`.
    pub stream: String,
    /// The read model's durable consumer, also its inbox's name; its dead
    /// letters go to `dlq.<durable>`.
    pub durable: String,
    /// The stream keeping those dead letters: `None` (the default) for the
    /// README's `DLQ` stream on `dlq.>`, which every consumer shares; a name
    /// for a stream of its own on `dlq.<durable>` (the tests, on a server
    /// whose `dlq.*` subjects other tests' streams capture).
    pub dead_letter_stream: Option<String>,
}

impl Default for ServiceNames {
    fn default() -> Self {
        Self {
            prefix: "ordersvc".to_owned(),
            stream: "ORDER_SERVICE".to_owned(),
            durable: "order-service-views".to_owned(),
            dead_letter_stream: None,
        }
    }
}

/// `POST /orders`' body.
#[derive(Debug, Serialize, Deserialize)]
pub struct PlaceOrder {
    /// Who orders.
    pub customer: String,
    /// The total, in cents.
    pub total_cents: u64,
}

/// `POST /orders`' answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Placed {
    /// The new order's id.
    pub id: String,
}

/// `GET /orders/{id}`'s answer: the read model's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderView {
    /// The order.
    pub order_id: String,
    /// The customer.
    pub customer: String,
    /// The total, in cents.
    pub total_cents: i64,
    /// `placed` or `paid`.
    pub status: String,
}

/// Creates what the service needs in its database: the outbox and inbox
/// tables (migrations), the orders table and the read model's table.
pub async fn prepare(db: &DatabaseConnection) -> Result<(), DbErr> {
    OutboxMigrator::up(db, None).await?;
    orders_table::create_table(db).await?;
    db.execute_unprepared(&format!(
        "CREATE TABLE IF NOT EXISTS {VIEW_TABLE} (order_id VARCHAR(64) NOT NULL PRIMARY KEY, \
         customer VARCHAR(200) NOT NULL, total_cents BIGINT NOT NULL, status VARCHAR(16) NOT NULL)"
    ))
    .await?;
    Ok(())
}

/// Prepares the database and the stream, starts the runtime (the processor
/// and the read model's subscriber), and returns the app's router (the
/// order routes and the runtime's) with the runtime, for
/// `axum::serve(..).with_graceful_shutdown(runtime.shutdown_signal())` and
/// then `runtime.shutdown()`.
pub async fn start(
    db: DatabaseConnection,
    nats: async_nats::Client,
    names: &ServiceNames,
) -> Result<(Router, Runtime), Box<dyn Error + Send + Sync>> {
    prepare(&db).await?;
    let outbox = Outbox::new(
        db,
        OutboxConfig::default().with_subject_prefix(&names.prefix)?,
    );
    let publisher = JetStreamPublisher::new(nats.clone(), "/order-service");
    StreamSpec::new(&names.stream, [format!("{}.>", names.prefix)])
        .ensure(publisher.jetstream())
        .await?;
    let inbox = Inbox::new(&outbox, &names.durable)?;
    let runtime = Runtime::builder()
        .processor(
            outbox
                .processor(publisher)
                .stats_interval(Some(Duration::from_secs(5))), // backlog age for /health/outbox
        )
        .subscriber(read_model(nats, &inbox, names))
        .start()
        .await?;
    let app = Router::new()
        .route("/orders", post(place_order))
        .route("/orders/{id}", get(read_order))
        .route("/orders/{id}/pay", post(pay_order))
        .with_state(outbox)
        .merge(runtime.router());
    Ok((app, runtime))
}

/// The read model's subscriber: both events through the inbox (which also
/// keeps them in order per order, across restarts).
fn read_model(nats: async_nats::Client, inbox: &Inbox, names: &ServiceNames) -> SubscriberBuilder {
    Subscriber::builder(nats, &names.durable)
        .stream(&names.stream)
        .dead_letter_stream(match &names.dead_letter_stream {
            None => StreamSpec::dead_letters(),
            Some(name) => StreamSpec::new(name, [format!("dlq.{}", names.durable)]),
        })
        .shutdown_timeout(Duration::from_secs(5))
        // A message whose hand-back at a restart is lost comes back within
        // this (see the subscriber's docs).
        .ack_wait(Duration::from_secs(10))
        .on(inbox.handler(on_placed))
        .on(inbox.handler(on_paid))
}

/// A new row in the read model.
async fn on_placed(
    event: OrderPlaced,
    _: Delivery,
    uow: &mut UnitOfWork,
) -> Result<(), HandlerError> {
    let total_cents = i64::try_from(event.total_cents)
        .map_err(|_| HandlerError::permanent("a total beyond i64"))?;
    let insert = Query::insert()
        .into_table(VIEW_TABLE)
        .columns(["order_id", "customer", "total_cents", "status"])
        .values([
            event.order_id.into(),
            event.customer.into(),
            total_cents.into(),
            OrderStatus::Placed.as_str().into(),
        ])?
        .to_owned();
    uow.connection().await?.execute(&insert).await?;
    Ok(())
}

/// The order's row turns `paid`.
async fn on_paid(event: OrderPaid, _: Delivery, uow: &mut UnitOfWork) -> Result<(), HandlerError> {
    let update = Query::update()
        .table(VIEW_TABLE)
        .value("status", OrderStatus::Paid.as_str())
        .and_where(Expr::col("order_id").eq(event.order_id))
        .to_owned();
    let updated = uow.connection().await?.execute(&update).await?;
    if updated.rows_affected() == 0 {
        // Not placed yet: try again later (with keep_order it always is).
        return Err(HandlerError::retry(
            "the order is not in the read model yet",
        ));
    }
    Ok(())
}

/// An error answered as a status and a one-line message.
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

impl<E: Error> From<E> for ApiError {
    fn from(err: E) -> Self {
        tracing::error!(error = %txoutbox::ErrorChain(&err), "request failed");
        Self(
            StatusCode::INTERNAL_SERVER_ERROR,
            txoutbox::ErrorChain(&err).to_string(),
        )
    }
}

async fn place_order(
    State(outbox): State<Outbox>,
    Json(body): Json<PlaceOrder>,
) -> Result<(StatusCode, Json<Placed>), ApiError> {
    let id = format!("o-{}", uuid::Uuid::now_v7().simple());
    let mut order = Order::place(&id, body.customer, body.total_cents)?;
    outbox.repository::<Order>().save(&mut order).await?; // order row + outbox row, one commit
    Ok((StatusCode::CREATED, Json(Placed { id })))
}

async fn pay_order(
    State(outbox): State<Outbox>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let orders = outbox.repository::<Order>();
    let Some(mut order) = orders.load(id.clone()).await? else {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no order {id}")));
    };
    match order.pay() {
        Ok(()) => {}
        Err(err @ OrderError::InvalidTransition { .. }) => {
            return Err(ApiError(StatusCode::CONFLICT, err.to_string()));
        }
        Err(err) => return Err(err.into()),
    }
    orders.save(&mut order).await?; // UPDATE .. WHERE version = loaded, + outbox row
    Ok(StatusCode::NO_CONTENT)
}

async fn read_order(
    State(outbox): State<Outbox>,
    Path(id): Path<String>,
) -> Result<Json<OrderView>, ApiError> {
    let select = Query::select()
        .columns(["order_id", "customer", "total_cents", "status"])
        .from(VIEW_TABLE)
        .and_where(Expr::col("order_id").eq(id.as_str()))
        .to_owned();
    let Some(row) = outbox.db().query_one(&select).await? else {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no order {id} yet"),
        ));
    };
    Ok(Json(OrderView {
        order_id: row.try_get("", "order_id")?,
        customer: row.try_get("", "customer")?,
        total_cents: row.try_get("", "total_cents")?,
        status: row.try_get("", "status")?,
    }))
}
