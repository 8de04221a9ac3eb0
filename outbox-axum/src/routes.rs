//! The routes: `/health/live`, `/health/ready`, `/health/outbox` (JSON)
//! and `/metrics` (Prometheus text).

use axum::Router;
use axum::extract::RawQuery;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Serialize;
use txoutbox_core::processor::Health;
use txoutbox_nats::OutboxHealth;
use txoutbox_nats::subscriber::{ConsumerLag, SubscriberHealth};

use crate::database::DatabaseStatus;
use crate::health::{Liveness, Readiness, RuntimeHealth};

/// The content type of Prometheus' text exposition format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The runtime's routes, for any application state `S`.
pub(crate) fn router<S>(health: RuntimeHealth, metrics: PrometheusHandle) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let live = health.clone();
    let outbox = health.clone();
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
            "/health/outbox",
            get(move |RawQuery(query): RawQuery| {
                let health = outbox.clone();
                async move {
                    let strict = asks_strict(query.as_deref());
                    outbox_response(&health.outbox().await, strict)
                }
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

/// Whether the query string asks for 503 when degraded: `strict`,
/// `strict=true` or `strict=1`.
fn asks_strict(query: Option<&str>) -> bool {
    query.is_some_and(|query| {
        query
            .split('&')
            .any(|pair| matches!(pair, "strict" | "strict=true" | "strict=1"))
    })
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
    let (database, database_error) = match &readiness.database {
        DatabaseStatus::Up => (Some("up"), None),
        DatabaseStatus::Down(error) => (Some("down"), Some(error.as_str())),
        DatabaseStatus::Unchecked => (None, None),
    };
    let body = ReadyBody {
        ready: readiness.ready,
        shutting_down: readiness.shutting_down,
        database,
        database_error,
        strict: readiness.strict,
        outbox: readiness.outbox.as_ref().map(OutboxBody::from),
        problems: &readiness.problems,
    };
    (status(readiness.ready), axum::Json(body)).into_response()
}

/// 200, or 503 when degraded and `strict`.
fn outbox_response(health: &OutboxHealth, strict: bool) -> Response {
    (
        status(health.ok || !strict),
        axum::Json(OutboxBody::from(health)),
    )
        .into_response()
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
    /// `"up"`, `"down"`, or null when not checked.
    database: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    database_error: Option<&'a str>,
    strict: bool,
    /// With strict readiness, the outbox's state it took into account.
    #[serde(skip_serializing_if = "Option::is_none")]
    outbox: Option<OutboxBody<'a>>,
    problems: &'a [String],
}

/// `/health/outbox`'s body.
#[derive(Serialize)]
struct OutboxBody<'a> {
    /// `"ok"` or `"degraded"`.
    status: &'static str,
    /// `"connected"`, `"connecting"`, `"disconnected"`, or null.
    broker: Option<&'static str>,
    processor: Option<ProcessorBody<'a>>,
    subscribers: Vec<SubscriberBody<'a>>,
    /// What keeps the runtime's streams from being used.
    streams: &'a [String],
    degraded: &'a [String],
    problems: &'a [String],
}

impl<'a> From<&'a OutboxHealth> for OutboxBody<'a> {
    fn from(health: &'a OutboxHealth) -> Self {
        Self {
            status: if health.ok { "ok" } else { "degraded" },
            broker: health.broker.map(|broker| broker.as_str()),
            processor: health.processor.as_ref().map(ProcessorBody::from),
            subscribers: health
                .subscribers
                .iter()
                .map(SubscriberBody::from)
                .collect(),
            streams: &health.streams,
            degraded: &health.degraded,
            problems: &health.problems,
        }
    }
}

#[derive(Serialize)]
struct ProcessorBody<'a> {
    healthy: bool,
    running: bool,
    since_last_claim_seconds: f64,
    oldest_pending_age_seconds: Option<f64>,
    unrecorded: usize,
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
            unrecorded: health.unrecorded,
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
    /// Built while the broker was away: its consumers not set up yet.
    connecting: bool,
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
            connecting: health.connecting,
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
    use txoutbox_core::processor::{HealthProbe, HealthThresholds};

    use super::*;
    use crate::database::DatabaseProbe;
    use crate::health::HealthParts;

    async fn answer(response: Response) -> (StatusCode, serde_json::Value) {
        let status = response.status();
        let body = to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body");
        (status, serde_json::from_slice(&body).expect("JSON"))
    }

    /// A runtime's health: `processor` (a probe of a processor that never
    /// ran, i.e. stopped) and a database answering `database`.
    fn health(
        processor: bool,
        database: Option<Result<(), String>>,
        strict: bool,
        shutdown: &CancellationToken,
    ) -> RuntimeHealth {
        RuntimeHealth::new(HealthParts {
            processor: processor.then(HealthProbe::default),
            subscribers: Vec::new(),
            database: database.map(DatabaseProbe::answering),
            clients: Vec::new(),
            thresholds: HealthThresholds::default(),
            probe_timeout: Duration::from_millis(100),
            strict,
            shutdown: shutdown.clone(),
        })
    }

    #[tokio::test]
    async fn shutting_down_is_live_and_not_ready() {
        let token = CancellationToken::new();
        let health = health(false, None, false, &token);
        let (status, body) = answer(ready_response(&health.readiness().await)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["ready"], true);
        assert_eq!(body["database"], serde_json::Value::Null, "not checked");

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
    async fn a_stalled_outbox_is_ready_by_default_and_degraded() {
        let token = CancellationToken::new();
        let health = health(true, Some(Ok(())), false, &token);
        let (status, body) = answer(ready_response(&health.readiness().await)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["database"], "up");
        assert_eq!(body["strict"], false);
        assert!(body.get("outbox").is_none(), "{body}");

        let outbox = health.outbox().await;
        let (status, body) = answer(outbox_response(&outbox, false)).await;
        assert_eq!(status, StatusCode::OK, "degraded still answers 200: {body}");
        assert_eq!(body["status"], "degraded");
        assert_eq!(body["degraded"][0], "processor");
        assert_eq!(body["processor"]["running"], false);
        assert_eq!(body["broker"], serde_json::Value::Null, "no client known");
        let (status, body) = answer(outbox_response(&outbox, true)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "strict: {body}");
    }

    #[tokio::test]
    async fn a_database_down_is_not_ready() {
        let token = CancellationToken::new();
        let health = health(false, Some(Err("connection refused".into())), false, &token);
        let (status, body) = answer(ready_response(&health.readiness().await)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["database"], "down");
        assert_eq!(body["database_error"], "connection refused");
        assert_eq!(
            body["problems"][0],
            "the database does not answer: connection refused"
        );
    }

    #[tokio::test]
    async fn strict_readiness_counts_the_outbox() {
        let token = CancellationToken::new();
        let health = health(true, Some(Ok(())), true, &token);
        let (status, body) = answer(ready_response(&health.readiness().await)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["strict"], true);
        assert_eq!(body["outbox"]["processor"]["running"], false, "{body}");
        assert_eq!(body["outbox"]["status"], "degraded", "{body}");
        let (status, body) = answer(live_response(&health.liveness())).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["problems"][0], "the processor has stopped");
    }

    #[test]
    fn strict_is_asked_in_the_query() {
        assert!(!asks_strict(None));
        assert!(!asks_strict(Some("strict=false")));
        assert!(asks_strict(Some("strict=true")));
        assert!(asks_strict(Some("x=1&strict")));
        assert!(asks_strict(Some("strict=1")));
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
