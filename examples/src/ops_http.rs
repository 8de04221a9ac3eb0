//! A service's operations endpoints: `/metrics` (Prometheus text, from the
//! `metrics-exporter-prometheus` recorder the service installed) and
//! `/health` (200 while the processor makes progress, 503 with the reasons
//! when it is stalled; see [`HealthProbe`]). A plain hyper HTTP/1 server, so
//! it adds no framework to a service that has none.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use txoutbox::processor::{HealthProbe, HealthThresholds};

/// What the endpoints read.
#[derive(Debug, Clone)]
pub struct OpsEndpoints {
    /// Renders the recorded metrics.
    pub metrics: PrometheusHandle,
    /// The processor's progress.
    pub health: HealthProbe,
    /// What counts as healthy.
    pub thresholds: HealthThresholds,
}

impl OpsEndpoints {
    /// The answer to `GET path`: status, content type, body.
    pub fn answer(&self, path: &str) -> (StatusCode, &'static str, String) {
        match path {
            "/metrics" => (
                StatusCode::OK,
                "text/plain; version=0.0.4",
                self.metrics.render(),
            ),
            "/health" => {
                let health = self.health.check(&self.thresholds);
                let status = if health.healthy {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                let body = json!({
                    "healthy": health.healthy,
                    "running": health.running,
                    "since_last_claim_seconds": health.since_last_claim.as_secs_f64(),
                    "oldest_pending_age_seconds":
                        health.oldest_pending_age.map(|age| age.as_secs_f64()),
                    "problems": health.problems,
                });
                (status, "application/json", format!("{body}\n"))
            }
            _ => (
                StatusCode::NOT_FOUND,
                "text/plain",
                "not found\n".to_owned(),
            ),
        }
    }
}

/// Serves `endpoints` on `listener` until `shutdown` is cancelled.
pub async fn serve(listener: TcpListener, endpoints: OpsEndpoints, shutdown: CancellationToken) {
    let endpoints = Arc::new(endpoints);
    loop {
        let (socket, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, "accepting an operations connection failed");
                    continue;
                }
            },
            () = shutdown.cancelled() => return,
        };
        let endpoints = Arc::clone(&endpoints);
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let (status, content_type, body) = endpoints.answer(request.uri().path());
                let mut response = Response::new(Full::new(Bytes::from(body)));
                *response.status_mut() = status;
                if let Ok(value) = content_type.parse() {
                    response
                        .headers_mut()
                        .insert(hyper::header::CONTENT_TYPE, value);
                }
                async move { Ok::<_, Infallible>(response) }
            });
            if let Err(err) = http1::Builder::new()
                .serve_connection(TokioIo::new(socket), service)
                .await
            {
                tracing::debug!(error = %err, "operations connection ended");
            }
        });
    }
}
