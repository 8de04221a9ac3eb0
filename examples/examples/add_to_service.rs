//! The outbox added to a service without a web framework, whole and
//! runnable: two events, an aggregate that is its own SeaORM model, the
//! tables and the stream, the processor, saving through the repository, a
//! plain `async fn` handler applied once through the inbox, the subscriber,
//! shutdown. (The README's complete example is the axum service in
//! `examples/readme-service`.)
//!
//! `cargo run -p txoutbox-examples --example add_to_service`
//! (`DATABASE_URL` for PostgreSQL or MariaDB, an SQLite file in the temp
//! directory otherwise; `NATS_URL`, or the NATS server on 127.0.0.1:4222).
//! It uses nothing of the examples' library: that one registers the demo's
//! own `order.placed` and `order.paid`, which would clash with these.

// The items as a service writes them, without doc comments.
#![allow(missing_docs)]

use std::time::Duration;

use std::error::Error;
use std::future::Future;

use sea_orm::sea_query::Query;
use sea_orm::{ConnectionTrait, Schema};
use serde::{Deserialize, Serialize};
use txoutbox::events::RecordError;
use txoutbox::processor::DEFAULT_LEASE;
use txoutbox::sea_orm::migration::{MigratorTrait, OutboxMigrator};
use txoutbox::{AggregateRoot, Delivery, HandlerError, IntegrationEvent, UnitOfWork};
use txoutbox::{
    Inbox, JetStreamPublisher, NatsConnect, Outbox, OutboxConfig, StreamSpec, Subscriber,
};

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
    pub amount_cents: i64,
}

pub mod order {
    use sea_orm::entity::prelude::*;

    // The SeaORM model is the aggregate: the derive maps it (the repository owns `version`).
    #[derive(Clone, Debug, Default, DeriveEntityModel, txoutbox::AggregateRoot)]
    #[sea_orm(table_name = "shop_orders")]
    #[aggregate(type = "order", entity = "Entity", version_column = "Column::Version")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        #[aggregate(id)]
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
    pub fn place(id: &str, total_cents: i64) -> Result<Self, RecordError> {
        let mut order = Self {
            id: id.into(),
            total_cents,
            ..Default::default()
        };
        order.record(OrderPlaced {
            order_id: id.into(),
            total_cents,
        })?;
        Ok(order)
    }
    pub fn pay(&mut self) -> Result<(), RecordError> {
        self.paid = true;
        self.record(OrderPaid {
            order_id: self.id.clone(),
            amount_cents: self.total_cents,
        })
    }
}

/// The handler: its effect commits with the inbox row, once per message.
/// The event's fields are bound as parameters, never formatted into SQL.
async fn on_paid(event: OrderPaid, _: Delivery, uow: &mut UnitOfWork) -> Result<(), HandlerError> {
    let insert = Query::insert()
        .into_table("invoices")
        .columns(["order_id", "cents"])
        .values([event.order_id.into(), event.amount_cents.into()])?
        .to_owned();
    uow.connection().await?.execute(&insert).await?;
    Ok(())
}

/// The service: runs until `stop` completes.
pub async fn run(
    database_url: &str,
    nats_url: &str,
    stop: impl Future<Output = ()>,
) -> Result<(), Box<dyn Error>> {
    // 1. Once: the tables (outbox + inbox, the service's own) and the stream.
    let db = sea_orm::Database::connect(database_url).await?;
    OutboxMigrator::up(&db, None).await?; // history in `outbox_migrations`
    let schema = Schema::new(db.get_database_backend());
    db.execute(
        schema
            .create_table_from_entity(order::Entity)
            .if_not_exists(),
    )
    .await?;
    db.execute_unprepared(
        "CREATE TABLE IF NOT EXISTS invoices (order_id VARCHAR(64), cents BIGINT)",
    )
    .await?;
    let outbox = Outbox::new(
        db.clone(),
        OutboxConfig::default().with_subject_prefix("shop")?,
    );
    let nats = NatsConnect::new(nats_url).name("orders").connect().await?;
    let publisher = JetStreamPublisher::new(nats.clone(), "/orders-service"); // ce-source
    let lease = DEFAULT_LEASE; // 3 s: the stream's dedup window (2 min) must outlast it
    StreamSpec::new("SHOP", ["shop.>"])
        .processor_lease(lease)
        .ensure(publisher.jetstream())
        .await?;

    // 2. Next to the service: the processor (woken by this process's commits,
    //    by NOTIFY from other processes on PostgreSQL, and once a second).
    let processor = outbox.processor(publisher).lease(lease).build()?.spawn();

    // 3. In a request handler: change state, record events, save. One transaction.
    let id = txoutbox::uuid::Uuid::now_v7().to_string();
    let mut order = order::Model::place(&id, 1250)?; // records OrderPlaced
    order.pay()?; // records OrderPaid
    outbox.repository::<order::Model>().save(&mut order).await?; // order row + 2 outbox rows

    // 4. Consume: a plain async fn per event, its effects applied once (inbox).
    let inbox = Inbox::new(&outbox, "billing")?;
    let subscriber = Subscriber::builder(nats.clone(), "billing")
        .stream("SHOP")
        .dead_letter_stream(StreamSpec::dead_letters()) // its dead letters: `dlq.billing`, in `DLQ`
        .on(inbox.handler(on_paid))
        .build()
        .await?
        .spawn();

    // 5. On shutdown: acks in flight are recorded, nothing stays leased.
    stop.await;
    subscriber.shutdown().await?;
    processor.shutdown().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    txoutbox_examples::support::exit_on_help(include_str!("add_to_service.rs"));
    let sqlite = std::env::temp_dir().join("outbox_add_to_service.sqlite");
    let database_url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}?mode=rwc", sqlite.display()));
    let nats_url = std::env::var("NATS_URL").unwrap_or_else(|_| "127.0.0.1:4222".into());
    // Stop once the handler has written a new invoice (runs may share a database).
    let db = sea_orm::Database::connect(&database_url).await?;
    let before = invoices(&db).await;
    run(&database_url, &nats_url, async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        while invoices(&db).await <= before {
            if tokio::time::Instant::now() > deadline {
                eprintln!("no invoice after 15 s");
                std::process::exit(1);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await?;
    println!("an order placed, paid, published, invoiced once");
    Ok(())
}

/// How many invoices the handler has written (0 before the table exists).
async fn invoices(db: &sea_orm::DatabaseConnection) -> usize {
    let all = Query::select()
        .column("order_id")
        .from("invoices")
        .to_owned();
    db.query_all(&all).await.map_or(0, |rows| rows.len())
}
