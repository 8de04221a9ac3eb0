//! A service's `/metrics` and `/health`, next to its processor.
//!
//! `cargo run -p txoutbox-examples --example metrics_endpoint` (until Ctrl-C)
//! `cargo run -p txoutbox-examples --example metrics_endpoint -- --port 9898 --for 30`
//!
//! Installs the `metrics-exporter-prometheus` recorder (the processor's
//! metrics, e.g. `outbox_published_total`, `outbox_oldest_pending_age_seconds`,
//! appear once installed), runs the processor, records an order every
//! second, and serves:
//!
//! - `GET /metrics`: the Prometheus text format;
//! - `GET /health`: 200 while the processor claims and nothing waits longer
//!   than 60 s, else 503 with the reasons (`HealthProbe::check`).

use std::error::Error;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use tokio_util::sync::CancellationToken;
use txoutbox::OutboxConfig;
use txoutbox::processor::HealthThresholds;
use txoutbox::{JetStreamPublisher, StreamSpec};
use txoutbox_examples::checkout;
use txoutbox_examples::ops_http::{self, OpsEndpoints};
use txoutbox_examples::support::{self, Nats};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    txoutbox_examples::support::exit_on_help(include_str!("metrics_endpoint.rs"));
    support::init_logging();
    let port: u16 = arg("--port").map_or(Ok(9898), |p| p.parse())?;
    let run_for = arg("--for")
        .map(|s| s.parse().map(Duration::from_secs))
        .transpose()?;

    // 1. The recorder, before anything records.
    let metrics = PrometheusBuilder::new().install_recorder()?;

    // 2. The outbox, the stream and the processor.
    let url = support::database_url("outbox-metrics-endpoint");
    let config = OutboxConfig::default().with_subject_prefix(support::EXAMPLE_PREFIX)?;
    let outbox = support::open_outbox(&url, config).await?;
    txoutbox_examples::orders_table::create_table(outbox.db()).await?;
    let nats = Nats::find_or_start()?;
    let client = nats.connect().await?;
    StreamSpec::new(
        support::EXAMPLE_STREAM,
        [format!("{}.>", support::EXAMPLE_PREFIX)],
    )
    .ensure(&async_nats::jetstream::new(client.clone()))
    .await?;
    let processor = outbox
        .processor(JetStreamPublisher::new(client, "/metrics-example"))
        .stats_interval(Some(Duration::from_secs(5))) // backlog gauges and health
        .build()?
        .spawn();

    // 3. The endpoints.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!(
        "serving http://{}/metrics and /health",
        listener.local_addr()?
    );
    let endpoints = OpsEndpoints {
        metrics,
        health: processor.health(),
        thresholds: HealthThresholds::default(),
    };
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(ops_http::serve(listener, endpoints, shutdown.clone()));

    // 4. Some traffic: an order a second, placed and paid by the service's
    //    use cases (the functions `testing_a_service` tests).
    let deadline = run_for.map(|d| tokio::time::Instant::now() + d);
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            break;
        }
        let id = format!("m-{}", uuid::Uuid::now_v7().simple());
        checkout::place_order(&outbox, &id, "ada", 100).await?;
        checkout::pay_order(&outbox, &id).await?;
    }
    shutdown.cancel();
    server.await?;
    processor.shutdown().await?;
    println!("stopped cleanly");
    Ok(())
}
