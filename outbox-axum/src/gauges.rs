//! The gauges only a probe sees: the runtime's connection to NATS and each
//! subscriber's lag, sampled while the runtime runs, so that the metrics
//! (and the alerts on them) cover what `/health/outbox` reports.
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `outbox_broker_connected` | gauge | | 1 while the runtime's NATS connections are all up, else 0 (connecting or disconnected); absent for a runtime that knows no client |
//! | `outbox_consumer_pending` | gauge | `consumer` | the subscriber's lag: messages of its stream not yet delivered to it, as the server last said (kept while the server cannot say) |

use std::time::Duration;

use txoutbox_nats::BrokerConnection;

use crate::health::RuntimeHealth;

/// `outbox_broker_connected`.
pub(crate) const BROKER_CONNECTED: &str = "outbox_broker_connected";
/// `outbox_consumer_pending`.
pub(crate) const CONSUMER_PENDING: &str = "outbox_consumer_pending";

/// How often the gauges are sampled.
pub(crate) const SAMPLE_INTERVAL: Duration = Duration::from_secs(5);

/// Samples `health` into the gauges every [`SAMPLE_INTERVAL`], until
/// aborted.
pub(crate) async fn sample(health: RuntimeHealth) {
    let mut ticks = tokio::time::interval(SAMPLE_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let outbox = health.outbox().await;
        if let Some(broker) = outbox.broker {
            let connected = if broker == BrokerConnection::Connected {
                1.0
            } else {
                0.0
            };
            metrics::gauge!(BROKER_CONNECTED).set(connected);
        }
        for subscriber in &outbox.subscribers {
            if let Some(pending) = subscriber.pending {
                metrics::gauge!(CONSUMER_PENDING, "consumer" => subscriber.durable.clone())
                    .set(pending as f64);
            }
        }
    }
}
