//! The routes: `/health/live`, `/health/ready` (JSON, 200 or 503) and
//! `/metrics` (Prometheus text).

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Serialize;
use txoutbox_core::processor::Health;
use txoutbox_nats::subscriber::{ConsumerLag, SubscriberHealth};

use crate::health::{Liveness, Readiness, RuntimeHealth};

/// The content type of Prometheus' text exposition format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The runtime's routes, for any application state `S`.
pub(crate) fn router<S>(health: RuntimeHealth, metrics: PrometheusHandle) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let live = health.clone();
    Router::new()
        .route(
            "/health/live",
            get(move || {
                let health = live.clone();
                async move { live_response(&health.liveness()) }
            }),
        )
        .route(
            "/health/ready",
            get(move || {
                let health = health.clone();
                async move { ready_response(&health.readiness().await) }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move { ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], metrics.render()) }
            }),
        )
}

fn status(ok: bool) -> StatusCode {
    if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

fn live_response(liveness: &Liveness) -> Response {
    let body = LiveBody {
        live: liveness.live,
        shutting_down: liveness.shutting_down,
        problems: &liveness.problems,
    };
    (status(liveness.live), axum::Json(body)).into_response()
}

fn ready_response(readiness: &Readiness) -> Response {
    let body = ReadyBody {
        ready: readiness.ready,
        shutting_down: readiness.shutting_down,
        processor: readiness.processor.as_ref().map(ProcessorBody::from),
        subscribers: readiness
            .subscribers
            .iter()
            .map(SubscriberBody::from)
            .collect(),
        problems: &readiness.problems,
    };
    (status(readiness.ready), axum::Json(body)).into_response()
}

/// `/health/live`'s body.
#[derive(Serialize)]
struct LiveBody<'a> {
    live: bool,
    shutting_down: bool,
    problems: &'a [String],
}

/// `/health/ready`'s body.
#[derive(Serialize)]
struct ReadyBody<'a> {
    ready: bool,
    shutting_down: bool,
    processor: Option<ProcessorBody<'a>>,
    subscribers: Vec<SubscriberBody<'a>>,
    problems: &'a [String],
}

#[derive(Serialize)]
struct ProcessorBody<'a> {
    healthy: bool,
    running: bool,
    since_last_claim_seconds: f64,
    oldest_pending_age_seconds: Option<f64>,
    delayed: u64,
    blocked_aggregates: u64,
    problems: &'a [String],
}

impl<'a> From<&'a Health> for ProcessorBody<'a> {
    fn from(health: &'a Health) -> Self {
        Self {
            healthy: health.healthy,
            running: health.running,
            since_last_claim_seconds: health.since_last_claim.as_secs_f64(),
            oldest_pending_age_seconds: health.oldest_pending_age.map(|age| age.as_secs_f64()),
            delayed: health.delayed,
            blocked_aggregates: health.blocked_aggregates,
            problems: &health.problems,
        }
    }
}

#[derive(Serialize)]
struct SubscriberBody<'a> {
    durable: &'a str,
    stream: &'a str,
    ready: bool,
    running: bool,
    connected: bool,
    /// Messages not yet delivered: the lag.
    pending: Option<u64>,
    ack_pending: Option<u64>,
    in_flight: usize,
    held_aggregates: Option<usize>,
    /// Why it is paused (its inbox's database away), while it is.
    paused: Option<&'a str>,
    consumers: Vec<ConsumerBody<'a>>,
    problems: &'a [String],
}

impl<'a> From<&'a SubscriberHealth> for SubscriberBody<'a> {
    fn from(health: &'a SubscriberHealth) -> Self {
        Self {
            durable: &health.durable,
            stream: &health.stream,
            ready: health.ready,
            running: health.running,
            connected: health.connected,
            pending: health.pending,
            ack_pending: health.ack_pending,
            in_flight: health.in_flight,
            held_aggregates: health.held_aggregates,
            paused: health.paused.as_deref(),
            consumers: health.consumers.iter().map(ConsumerBody::from).collect(),
            problems: &health.problems,
        }
    }
}

#[derive(Serialize)]
struct ConsumerBody<'a> {
    name: &'a str,
    present: Option<bool>,
    pending: Option<u64>,
    ack_pending: Option<u64>,
    error: Option<&'a str>,
}

impl<'a> From<&'a ConsumerLag> for ConsumerBody<'a> {
    fn from(lag: &'a ConsumerLag) -> Self {
        Self {
            name: &lag.name,
            present: lag.present,
            pending: lag.pending,
            ack_pending: lag.ack_pending,
            error: lag.error.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::to_bytes;
    use tokio_util::sync::CancellationToken;
    use txoutbox_core::processor::HealthThresholds;

    use super::*;

    async fn answer(response: Response) -> (StatusCode, serde_json::Value) {
        let status = response.status();
        let body = to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body");
        (status, serde_json::from_slice(&body).expect("JSON"))
    }

    #[tokio::test]
    async fn shutting_down_is_live_and_not_ready() {
        let token = CancellationToken::new();
        let health = RuntimeHealth::new(
            None,
            Vec::new(),
            HealthThresholds::default(),
            Duration::from_millis(100),
            token.clone(),
        );
        let (status, body) = answer(ready_response(&health.readiness().await)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["ready"], true);
        assert_eq!(body["processor"], serde_json::Value::Null);

        token.cancel();
        let (status, body) = answer(ready_response(&health.readiness().await)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["shutting_down"], true);
        assert_eq!(body["problems"][0], "shutting down");
        let (status, body) = answer(live_response(&health.liveness())).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["live"], true);
    }

    #[tokio::test]
    async fn a_stopped_processor_is_not_live() {
        // A probe of a processor that never ran: not running.
        let health = RuntimeHealth::new(
            Some(txoutbox_core::processor::HealthProbe::default()),
            Vec::new(),
            HealthThresholds::default(),
            Duration::from_millis(100),
            CancellationToken::new(),
        );
        let (status, body) = answer(live_response(&health.liveness())).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["problems"][0], "the processor has stopped");
        let (status, body) = answer(ready_response(&health.readiness().await)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["processor"]["running"], false);
    }

    #[test]
    fn the_recorder_is_installed_once() {
        let first = crate::metrics::installed().expect("installed");
        let second = crate::metrics::installed().expect("the same one, not a second install");
        ::metrics::counter!("txoutbox_axum_test_total").increment(1);
        assert!(first.render().contains("txoutbox_axum_test_total"));
        assert!(second.render().contains("txoutbox_axum_test_total"));
    }
}
