use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use sea_orm::sea_query::{Expr, ExprTrait, Query};
use sea_orm::{ConnectionTrait, Schema};
use serde::{Deserialize, Serialize};
use txoutbox::prelude::*;

#[derive(Serialize, Deserialize, IntegrationEvent)]
#[event(name = "order.placed")] // subject `shop.order.placed` (prefix below), version 1
pub struct OrderPlaced {
    pub order_id: String,
    pub total_cents: i64,
}

#[derive(Serialize, Deserialize, IntegrationEvent)]
#[event(name = "order.paid")]
pub struct OrderPaid {
    pub order_id: String,
}

pub mod order {
    use sea_orm::entity::prelude::*;

    // The SeaORM model is the aggregate: the derive maps it (the repository owns `version`).
    #[derive(Clone, Debug, Default, DeriveEntityModel, txoutbox::AggregateRoot)]
    #[sea_orm(table_name = "shop_orders")]
    #[aggregate(type = "order", entity = "Entity", version_column = "Column::Version")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)] // the aggregate's id too
        pub id: String,
        pub total_cents: i64,
        pub paid: bool,
        pub version: i64,
        #[sea_orm(ignore)]
        pub events: txoutbox::EventBuffer, // recorded, not yet saved
    }
    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}
    impl ActiveModelBehavior for ActiveModel {}
}

impl order::Model {
    pub fn place(id: String, total_cents: i64) -> Result<Self, RecordError> {
        let mut order = Self {
            id: id.clone(),
            total_cents,
            ..Default::default()
        };
        order.record(OrderPlaced {
            order_id: id,
            total_cents,
        })?;
        Ok(order)
    }
    pub fn pay(&mut self) -> Result<(), RecordError> {
        self.paid = true;
        self.record(OrderPaid {
            order_id: self.id.clone(),
        })
    }
}

// The read model, kept through the inbox: each event applied once, in each order's sequence.
async fn on_placed(e: OrderPlaced, _: Delivery, uow: &mut UnitOfWork) -> Result<(), HandlerError> {
    let insert = Query::insert()
        .into_table("order_views")
        .columns(["id", "total_cents", "paid"])
        .values([e.order_id.into(), e.total_cents.into(), false.into()])?
        .to_owned();
    uow.connection().await?.execute(&insert).await?;
    Ok(())
}

async fn on_paid(e: OrderPaid, _: Delivery, uow: &mut UnitOfWork) -> Result<(), HandlerError> {
    let update = Query::update()
        .table("order_views")
        .value("paid", true)
        .and_where(Expr::col("id").eq(e.order_id))
        .to_owned();
    uow.connection().await?.execute(&update).await?;
    Ok(())
}

#[derive(Deserialize)]
struct NewOrder {
    total_cents: i64,
}

#[derive(Serialize)]
struct OrderView {
    id: String,
    total_cents: i64,
    paid: bool,
}

// POST /orders: the order row and its `order.placed` row commit together; 201 with the id.
async fn place_order(
    State(outbox): State<Outbox>,
    Json(new): Json<NewOrder>,
) -> Result<(StatusCode, String), HttpError> {
    let id = txoutbox::uuid::Uuid::now_v7().to_string();
    let mut order = order::Model::place(id.clone(), new.total_cents)?;
    outbox.repository::<order::Model>().save(&mut order).await?;
    Ok((StatusCode::CREATED, id))
}

// POST /orders/{id}/pay: load, change, save; retried on a conflict with another request.
async fn pay_order(State(outbox): State<Outbox>, Path(id): Path<String>) -> Result<(), HttpError> {
    outbox
        .transaction(async |mut uow| {
            let mut order = uow
                .load::<order::Model>(id.clone())
                .await?
                .ok_or(HttpError::not_found(&id))?;
            order.pay()?;
            uow.save(&mut order).await?;
            Ok(())
        })
        .await
}

// GET /orders/{id}: the read model, once the subscriber applied the order.
async fn get_order(
    State(outbox): State<Outbox>,
    Path(id): Path<String>,
) -> Result<Json<OrderView>, HttpError> {
    let select = Query::select()
        .columns(["id", "total_cents", "paid"])
        .from("order_views")
        .and_where(Expr::col("id").eq(id.as_str()))
        .to_owned();
    let row = outbox
        .db()
        .query_one(&select)
        .await?
        .ok_or(HttpError::not_found(&id))?;
    let (id, total_cents, paid) = (
        row.try_get("", "id")?,
        row.try_get("", "total_cents")?,
        row.try_get("", "paid")?,
    );
    Ok(Json(OrderView {
        id,
        total_cents,
        paid,
    }))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().any(|arg| arg == "--help" || arg == "-h") {
        println!("The README's order service. Environment: DATABASE_URL, NATS_URL, LISTEN.");
        return Ok(());
    }
    let env = |name, default: &str| std::env::var(name).unwrap_or(default.into());
    // Once: the tables (outbox + inbox, the service's own).
    let db = sea_orm::Database::connect(env("DATABASE_URL", "postgres://postgres@127.0.0.1/test"))
        .await?;
    OutboxMigrator::up(&db, None).await?;
    let schema = Schema::new(db.get_database_backend());
    db.execute(
        schema
            .create_table_from_entity(order::Entity)
            .if_not_exists(),
    )
    .await?;
    db.execute_unprepared("CREATE TABLE IF NOT EXISTS order_views (id VARCHAR(64) PRIMARY KEY, total_cents BIGINT, paid BOOLEAN)").await?;
    let outbox = Outbox::new(db, OutboxConfig::default().with_subject_prefix("shop")?);
    // While NATS is away, connects in the background: the service starts and takes writes.
    let nats = NatsConnect::new(env("NATS_URL", "127.0.0.1:4222"))
        .connect()
        .await?;
    let publisher = JetStreamPublisher::new(nats.clone(), "/shop"); // ce-source

    // The stream (ensured once NATS answers), the processor and the read model's subscriber
    // (its consumer set up then too), with health, metrics and shutdown.
    let inbox = Inbox::new(&outbox, "order-views")?;
    let runtime = Runtime::builder()
        .stream(nats.clone(), StreamSpec::new("SHOP", ["shop.>"]))
        .processor(outbox.processor(publisher))
        .subscriber(
            Subscriber::builder(nats, "order-views")
                .stream("SHOP")
                .dead_letter_stream(StreamSpec::dead_letters())
                .on(inbox.handler(on_placed))
                .on(inbox.handler(on_paid)),
        )
        .start()
        .await?;
    let app = Router::new()
        .route("/orders", post(place_order))
        .route("/orders/{id}/pay", post(pay_order))
        .route("/orders/{id}", get(get_order))
        .with_state(outbox);
    let listener = tokio::net::TcpListener::bind(env("LISTEN", "127.0.0.1:3000")).await?;
    // Merges /health/live, /health/ready, /health/outbox and /metrics; on SIGTERM, requests
    // finish, then the subscribers' handlers, then the processor publishes what it holds.
    runtime.serve(listener, app).await?;
    Ok(())
}
