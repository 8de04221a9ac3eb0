//! A subscriber built while its NATS server is down (issue 43, "Start
//! without the broker"): `build` succeeds with the client `NatsConnect`
//! returns, the subscriber's health says it is connecting, and it creates
//! its consumer and reads once the server answers; a consumer that turns
//! out wrong then stops it with a typed error, in its health's problems.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::stream::StorageType;
use serde::{Deserialize, Serialize};
use txoutbox_core::{Delivery, HandlerError, IntegrationEvent};
use txoutbox_nats::NatsConnect;
use txoutbox_nats::subscriber::{
    Subscriber, SubscriberBuildError, SubscriberBuilder, SubscriberError, SubscriberHealth,
};
use txoutbox_suite::nats::NatsServer;
use txoutbox_suite::subscriber::{SubscriberFixture, eventually};

#[derive(Debug, Clone, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "startup.step")]
struct Step {
    n: u64,
}

const PROBE: Duration = Duration::from_millis(500);

/// A private server with the fixture's file streams on it, stopped, and a
/// client from `NatsConnect` that connects in the background.
async fn stopped_server_with_streams() -> (NatsServer, SubscriberFixture, async_nats::Client) {
    let mut server = NatsServer::start().await.expect("a private nats-server");
    let fx =
        SubscriberFixture::new(server.connect().await.expect("a client"), StorageType::File).await;
    server.stop().expect("nats-server stops");
    let nats = NatsConnect::new(server.url())
        .connect()
        .await
        .expect("a server away at start is not an error");
    assert_eq!(nats.connection_state(), State::Pending);
    (server, fx, nats)
}

/// The fixture's subscriber (its stream, durable and dead letters), on
/// `nats` rather than the fixture's own client.
fn subscriber_on(fx: &SubscriberFixture, nats: async_nats::Client) -> SubscriberBuilder {
    Subscriber::builder(nats, &fx.durable)
        .stream(&fx.stream)
        .ack_wait(Duration::from_secs(2))
}

fn counting(
    count: &Arc<AtomicUsize>,
) -> impl Fn(Step, Delivery) -> std::future::Ready<Result<(), HandlerError>> + Send + Sync + 'static
{
    let count = Arc::clone(count);
    move |_, _| {
        count.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_built_while_nats_is_down_sets_up_its_consumer_when_it_answers() {
    let (mut server, fx, nats) = stopped_server_with_streams().await;
    let handled = Arc::new(AtomicUsize::new(0));
    let running = subscriber_on(&fx, nats)
        .on(counting(&handled))
        .unordered()
        .build()
        .await
        .expect("built while the server is down")
        .spawn();
    let health: SubscriberHealth = running.health().check(PROBE).await;
    assert!(health.connecting && !health.ready, "{health:?}");
    assert!(
        health.problems.iter().any(|p| p.contains("connecting")),
        "{health:?}"
    );

    server.restart().await.expect("nats-server starts");
    fx.publish(&fx.message(&Step { n: 1 }, "a-1", 1)).await;
    eventually("the message handled", Duration::from_secs(5), || async {
        handled.load(Ordering::SeqCst) == 1
    })
    .await;
    let health = running.health().check(PROBE).await;
    assert!(health.ready && !health.connecting, "{health:?}");
    assert_eq!(
        fx.consumer_info().await.config.ack_wait,
        Duration::from_secs(2)
    );
    running.shutdown().await.expect("a clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_does_not_fit_stops_the_subscriber_once_nats_answers() {
    let mut server = NatsServer::start().await.expect("a private nats-server");
    let fx =
        SubscriberFixture::new(server.connect().await.expect("a client"), StorageType::File).await;
    // The durable exists with another ack wait.
    fx.subscriber()
        .ack_wait(Duration::from_secs(9))
        .on(counting(&Arc::default()))
        .unordered()
        .build()
        .await
        .expect("the first durable");
    server.stop().expect("nats-server stops");
    let nats = NatsConnect::new(server.url())
        .connect()
        .await
        .expect("a client connecting in the background");

    let running = subscriber_on(&fx, nats)
        .on(counting(&Arc::default()))
        .unordered()
        .build()
        .await
        .expect("built while the server is down")
        .spawn();
    let probe = running.health();
    server.restart().await.expect("nats-server starts");
    let stopped = tokio::time::timeout(Duration::from_secs(5), running.stopped())
        .await
        .expect("stopped within 5 s of the server's start");
    match stopped {
        Err(SubscriberError::Setup(SubscriberBuildError::ConsumerMismatch { setting, .. })) => {
            assert_eq!(setting, "ack_wait");
        }
        other => panic!("expected a consumer mismatch, got {other:?}"),
    }
    let health = probe.check(PROBE).await;
    assert!(
        health
            .problems
            .iter()
            .any(|p| p.contains("could not set up its consumers") && p.contains("ack_wait")),
        "{health:?}"
    );
}
