//! The processor's health probe against a real PostgreSQL and a private
//! nats-server: healthy while it publishes, stalled (no claims, pending
//! messages growing old) while the broker is down, healthy again once it is
//! back, and "stopped" after shutdown.

mod processor_support;

use std::time::Duration;

use processor_support::{Setup, private_setup, save_new_order, wait_all_published, wait_until};
use txoutbox_core::processor::{Health, HealthProbe, HealthThresholds};
use txoutbox_nats::JetStreamPublisher;
use txoutbox_suite::Backend;
use txoutbox_suite::nats::NatsServer;

async fn health_becomes(
    probe: &HealthProbe,
    limits: &HealthThresholds,
    what: &str,
    want: fn(&Health) -> bool,
) -> Health {
    wait_until(Duration::from_secs(20), what, || async {
        want(&probe.check(limits))
    })
    .await;
    probe.check(limits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_while_the_broker_is_down_healthy_again_after() {
    let mut server = NatsServer::start().await.expect("a private nats-server");
    let Setup {
        test,
        stream: _stream,
        outbox,
        table,
    } = private_setup(&server, Backend::Postgres, "health").await;
    let processor = outbox
        .processor(JetStreamPublisher::new(
            server
                .connect()
                .await
                .expect("a client of the private nats-server"),
            "/health",
        ))
        .poll_interval(Duration::from_millis(200))
        .stats_interval(Some(Duration::from_millis(200)))
        .unavailable_backoff(Duration::from_millis(50), Duration::from_millis(300))
        .build()
        .expect("valid settings")
        .spawn();
    let probe = processor.health();
    let limits = HealthThresholds::default()
        .max_claim_gap(Duration::from_millis(1500))
        .max_oldest_pending_age(Duration::from_secs(2));

    save_new_order(&outbox, "o-1", 10).await;
    wait_all_published(&test, &table, 1).await;
    let healthy = health_becomes(&probe, &limits, "healthy", |h| h.healthy).await;
    assert!(
        healthy.running && healthy.problems.is_empty(),
        "{healthy:?}"
    );
    assert!(healthy.since_last_claim < Duration::from_millis(1500));

    // The broker goes away with a message to publish: no claims, and the
    // message waits.
    server.kill();
    save_new_order(&outbox, "o-2", 20).await;
    let stalled = health_becomes(&probe, &limits, "stalled on both counts", |h| {
        h.problems.len() == 2
    })
    .await;
    assert!(!stalled.healthy);
    assert!(
        stalled.problems[0].contains("no successful claim"),
        "{stalled:?}"
    );
    assert!(
        stalled.problems[1].contains("oldest pending message"),
        "{stalled:?}"
    );
    assert!(stalled.oldest_pending_age.unwrap() > Duration::from_secs(2));

    server.restart().await.expect("nats-server restarted");
    wait_all_published(&test, &table, 2).await;
    let recovered = health_becomes(&probe, &limits, "healthy again", |h| h.healthy).await;
    assert_eq!(recovered.oldest_pending_age, None, "{recovered:?}");

    processor.shutdown().await.expect("clean shutdown");
    let stopped = probe.check(&limits);
    assert_eq!(stopped.problems, ["the processor has stopped".to_owned()]);
}
