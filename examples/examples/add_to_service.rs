//! The README's "Add the outbox to your service", whole and runnable: the
//! tables and the stream, the processor, saving an aggregate (through the
//! repository, and inside a transaction the service already has), a plain
//! `async fn` handler applied once through the inbox, shutdown.
//!
//! `cargo run -p txoutbox-examples --example add_to_service`
//! (`DATABASE_URL` for PostgreSQL or MariaDB; SQLite in the temp directory
//! otherwise; the NATS server on 127.0.0.1:4222, or a private one).
//!
//! The part between the `README` markers is the README's snippet, checked
//! word for word by `examples/tests/readme_snippets.rs`.

use std::error::Error;
use std::time::Duration;

use sea_orm::sea_query::{Expr, ExprTrait, Query};
use sea_orm::{ConnectionTrait, TransactionTrait};
use txoutbox::sea_orm::migration::{MigratorTrait, OutboxMigrator};
use txoutbox::{
    Delivery, HandlerError, Inbox, JetStreamPublisher, NatsConnect, Outbox, OutboxConfig,
    StreamSpec, Subscriber, UnitOfWork,
};
use txoutbox_examples::orders::{Order, OrderPaid};
use txoutbox_examples::{orders_table, support};

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

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    support::init_logging();
    let database_url = support::database_url("outbox_add_to_service");
    let nats_server = support::Nats::find_or_start()?;
    let nats_url = nats_server.url.clone();
    let id = format!("o-{}", uuid::Uuid::now_v7().simple());
    let prepare = sea_orm::Database::connect(&database_url).await?;
    orders_table::create_table(&prepare).await?; // the service's own tables
    prepare
        .execute_unprepared(
            "CREATE TABLE IF NOT EXISTS invoices (order_id VARCHAR(64) NOT NULL, cents BIGINT NOT NULL)",
        )
        .await?;

    // README-BEGIN add-to-service
    // 1. Once: the tables (outbox + inbox) and the stream.
    let db = sea_orm::Database::connect(&database_url).await?;
    OutboxMigrator::up(&db, None).await?; // history in `outbox_migrations`
    let config = OutboxConfig::default().with_subject_prefix("shop")?; // subjects `shop.*`
    let outbox = Outbox::new(db.clone(), config);
    let nats = NatsConnect::new(&nats_url).name("orders").connect().await?;
    let publisher = JetStreamPublisher::new(nats.clone(), "/orders-service"); // ce-source
    StreamSpec::new("SHOP", ["shop.>"])
        .ensure(publisher.jetstream(), Duration::from_secs(30))
        .await?;

    // 2. Next to the service: the processor (woken by this process's commits,
    //    by NOTIFY from other processes on PostgreSQL, and once a second).
    let processor = outbox.processor(publisher).build()?.spawn();

    // 3. In a request handler: change state, record events, save. One transaction.
    let mut order = Order::place(&id, "ada", 1250)?; // records OrderPlaced
    outbox.repository::<Order>().save(&mut order).await?; // order row + outbox row

    // ... or inside the transaction the service already has:
    let txn = db.begin().await?;
    let mut joined = outbox.join(&txn);
    let mut order = joined
        .load::<Order>(id.clone())
        .await?
        .ok_or("no such order")?;
    order.pay()?; // records OrderPaid
    joined.save(&mut order).await?; // UPDATE ... WHERE version = loaded, + outbox row
    let written = joined.after_commit();
    txn.commit().await?; // the service commits, as before
    written.wake(); // published at once

    // 4. Consume: a plain async fn per event, its effects applied once (inbox).
    let inbox = Inbox::new(&outbox, "billing")?;
    let subscriber = Subscriber::builder(nats.clone(), "billing")
        .stream("SHOP")
        .dead_letter_stream(StreamSpec::new("BILLING_DLQ", ["dlq.billing"])) // its dead letters
        .on(inbox.handler(on_paid))
        .build()
        .await?
        .spawn();

    // 5. On shutdown: acks in flight are recorded, nothing stays leased.
    // README-END add-to-service
    wait_for_invoice(&db, &id).await?;
    println!("order {id}: placed, paid, published, invoiced once");
    subscriber.shutdown().await?;
    processor.shutdown().await?;
    Ok(())
}

/// Waits (up to 15 s) until the handler has written the order's invoice.
async fn wait_for_invoice(
    db: &sea_orm::DatabaseConnection,
    id: &str,
) -> Result<(), Box<dyn Error>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let invoice = Query::select()
            .column("order_id")
            .from("invoices")
            .and_where(Expr::col("order_id").eq(id))
            .to_owned();
        if !db.query_all(&invoice).await?.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("no invoice for {id} after 15 s").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
