//! An axum service with the outbox inside: `POST /orders` saves an order
//! and its event in one commit, the processor publishes it to JetStream, a
//! subscriber in the same service applies it to a read model through the
//! inbox, `GET /orders/{id}` reads the read model; `/health/live`,
//! `/health/ready`, `/health/outbox` and `/metrics` come from the runtime,
//! and SIGTERM or Ctrl-C shut it all down in order.
//!
//! `cargo run -p txoutbox-examples --example axum_service`, then:
//!
//! ```text
//! curl -si -X POST localhost:3000/orders -H 'content-type: application/json' \
//!      -d '{"customer":"ada","total_cents":1250}'           # 201 {"id":"o-..."}
//! curl -si -X POST localhost:3000/orders/o-.../pay           # 204
//! curl -s localhost:3000/orders/o-...                        # {"status":"paid",..}
//! curl -s localhost:3000/health/ready                        # 200 {"ready":true,"database":"up",..}
//! curl -s localhost:3000/health/outbox                       # {"status":"ok","broker":"connected",..}
//! curl -s localhost:3000/metrics | grep outbox_              # Prometheus text
//! ```
//!
//! `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`; MariaDB
//! and SQLite URLs work too), `NATS_URL` (default `127.0.0.1:4222`),
//! `LISTEN` (default `127.0.0.1:3000`). Its subjects are `ordersvc.*`, its
//! stream `ORDER_SERVICE`, its consumer `order-service-views`.

use std::error::Error;

use txoutbox::NatsConnect;
use txoutbox_examples::order_service::{self, DEFAULT_DATABASE_URL, DEFAULT_NATS_URL};
use txoutbox_examples::support;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    txoutbox_examples::support::exit_on_help(include_str!("axum_service.rs"));
    support::init_logging_at("info,sqlx=warn");
    let env =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let database_url = env("DATABASE_URL", DEFAULT_DATABASE_URL);
    let nats_url = env("NATS_URL", DEFAULT_NATS_URL);
    let listen = env("LISTEN", "127.0.0.1:3000");

    let db = sea_orm::Database::connect(&database_url).await?;
    let nats = NatsConnect::new(&nats_url)
        .name("order-service")
        .connect()
        .await?;
    let (app, runtime) =
        order_service::start(db, nats, &order_service::ServiceNames::default()).await?;

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!(
        "order service on http://{} ({}; NATS {nats_url}); Ctrl-C stops it",
        listener.local_addr()?,
        support::display_url(&database_url)
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(runtime.shutdown_signal()) // SIGTERM or Ctrl-C
        .await?;
    // The server has stopped: the subscriber finishes its handlers, then the
    // processor publishes what it holds; nothing stays leased.
    let report = runtime.shutdown().await?;
    println!(
        "stopped cleanly ({} published by this process)",
        report.map_or(0, |report| report.published)
    );
    Ok(())
}
