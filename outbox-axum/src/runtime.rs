//! [`Runtime`]: the processor and the subscribers of a service, running,
//! with their routes and their ordered shutdown.

use std::future::Future;

use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use txoutbox_core::ErrorChain;
use txoutbox_core::processor::{ProcessorHandle, ProcessorReport};
use txoutbox_nats::subscriber::RunningSubscriber;

use crate::builder::RuntimeBuilder;
use crate::health::RuntimeHealth;
use crate::{RuntimeError, routes, signal};

/// A service's outbox parts, running: its processor and its subscribers,
/// their health and metrics as an axum [`Router`], a shutdown signal for
/// `axum::serve`, and [`shutdown`](Self::shutdown) in order (see the
/// [crate docs](crate)).
///
/// Dropping it without `shutdown` starts each part's graceful shutdown in
/// the background, unawaited.
#[derive(Debug)]
pub struct Runtime {
    health: RuntimeHealth,
    metrics: PrometheusHandle,
    /// The recorder's upkeep and the gauges' sampler: aborted as the
    /// runtime stops.
    background: Vec<JoinHandle<()>>,
    processor: Option<ProcessorHandle>,
    subscribers: Vec<RunningSubscriber>,
    shutdown: CancellationToken,
    signals: bool,
}

impl Runtime {
    /// A builder: add the processor and the subscribers, then `start()`.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    pub(crate) fn new(
        health: RuntimeHealth,
        metrics: PrometheusHandle,
        background: Vec<JoinHandle<()>>,
        processor: Option<ProcessorHandle>,
        subscribers: Vec<RunningSubscriber>,
        shutdown: CancellationToken,
        signals: bool,
    ) -> Self {
        Self {
            health,
            metrics,
            background,
            processor,
            subscribers,
            shutdown,
            signals,
        }
    }

    /// The routes, to `merge` into the application's router (or `nest`
    /// under a prefix), whatever its state type:
    ///
    /// | route | answers |
    /// |---|---|
    /// | `GET /health/live` | 200 while every part's task runs (or the runtime shuts down), else 503: the process should be restarted; JSON `{"live", "shutting_down", "problems"}` |
    /// | `GET /health/ready` | 200 when not shutting down and the database answers, else 503: whether the process should receive requests (a broker outage, a lag or a backlog leave it 200, unless [`strict_readiness`](RuntimeBuilder::strict_readiness)); JSON `{"ready", "shutting_down", "database": "up"/"down"/null, "database_error", "strict", "problems"}` (with `"outbox"` when strict) |
    /// | `GET /health/outbox` | 200, or with `?strict=true` 503 when degraded: the outbox's state; JSON `{"status": "ok"/"degraded", "broker": "connected"/"connecting"/"disconnected"/null, "processor", "subscribers", "degraded", "problems"}`: the processor's progress, and per subscriber `connected`, its consumers on the server, `pending` (the lag), `ack_pending`, `in_flight`, `held_aggregates`, `paused` (why, while its inbox's database is away) |
    /// | `GET /metrics` | the Prometheus text exposition of every metric recorded (the outbox's `outbox_*` and the application's own) |
    ///
    /// ```no_run
    /// # async fn run(runtime: txoutbox_axum::Runtime) {
    /// use axum::Router;
    /// use axum::routing::get;
    ///
    /// let app: Router = Router::new()
    ///     .route("/", get(|| async { "hello" }))
    ///     .merge(runtime.router()); // or .nest("/ops", runtime.router())
    /// # }
    /// ```
    pub fn router<S>(&self) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        routes::router(self.health.clone(), self.metrics.clone())
    }

    /// The parts' health, as the routes read it.
    pub fn health(&self) -> RuntimeHealth {
        self.health.clone()
    }

    /// The Prometheus handle `/metrics` renders.
    pub fn metrics(&self) -> &PrometheusHandle {
        &self.metrics
    }

    /// A future for `axum::serve(..).with_graceful_shutdown(..)`: resolves
    /// on SIGTERM or Ctrl-C (unless
    /// [`handle_signals(false)`](RuntimeBuilder::handle_signals)), or when
    /// the [token](Self::shutdown_token) is cancelled, and cancels the
    /// token then: `/health/ready` answers 503 from that moment, so load
    /// balancers stop sending requests while the server drains. Call it as
    /// often as needed; every such future resolves together.
    ///
    /// ```no_run
    /// # async fn run(runtime: txoutbox_axum::Runtime, app: axum::Router) -> Result<(), Box<dyn std::error::Error>> {
    /// let listener = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
    /// axum::serve(listener, app.merge(runtime.router()))
    ///     .with_graceful_shutdown(runtime.shutdown_signal())
    ///     .await?;
    /// runtime.shutdown().await?; // after the server: subscribers, then the processor
    /// # Ok(()) }
    /// ```
    pub fn shutdown_signal(&self) -> impl Future<Output = ()> + Send + 'static {
        signal::shutdown_signal(self.shutdown.clone(), self.signals)
    }

    /// The token that starts the shutdown: cancel it to stop the server
    /// (through [`shutdown_signal`](Self::shutdown_signal)) from the
    /// application.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Serves `app`, with the runtime's [routes](Self::router) merged into
    /// it, on `listener` until the [shutdown signal](Self::shutdown_signal)
    /// (SIGTERM, Ctrl-C or the token), lets requests in flight finish, then
    /// [shuts the runtime down](Self::shutdown) in order: the three calls
    /// of a service's usual ending in one.
    ///
    /// ```no_run
    /// # async fn run(runtime: txoutbox_axum::Runtime, app: axum::Router) -> Result<(), Box<dyn std::error::Error>> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    /// runtime.serve(listener, app).await?; // until SIGTERM; then subscribers, then the processor
    /// # Ok(()) }
    /// ```
    ///
    /// `app` must not have the runtime's routes merged already (axum
    /// refuses a route twice); to nest them under a prefix, write the three
    /// calls out (the [`shutdown_signal`](Self::shutdown_signal) example).
    /// The runtime is shut down even when the server fails
    /// ([`RuntimeError::Serve`], returned after the shutdown).
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        app: Router,
    ) -> Result<Option<ProcessorReport>, RuntimeError> {
        let served = axum::serve(listener, app.merge(self.router()))
            .with_graceful_shutdown(self.shutdown_signal())
            .await;
        let stopped = self.shutdown().await;
        served.map_err(RuntimeError::Serve)?;
        stopped
    }

    /// Stops every part, in order, and waits until they have stopped. Call
    /// it once the server has stopped (no request can record events any
    /// more):
    ///
    /// 1. the subscribers, all at once: they stop fetching, hand back what
    ///    waits, and let running handlers finish (up to each one's
    ///    `shutdown_timeout`), so their effects, and the events their
    ///    handlers record, are committed;
    /// 2. then the processor: it stops claiming, waits for the acks of what
    ///    it publishes, records them, and releases the rest; nothing stays
    ///    leased to it.
    ///
    /// Every part is stopped even when one fails; each failure is logged,
    /// and the first is returned. Returns the processor's report, if the
    /// runtime has a processor.
    pub async fn shutdown(mut self) -> Result<Option<ProcessorReport>, RuntimeError> {
        self.shutdown.cancel();
        let mut first_error = None;
        let subscribers = std::mem::take(&mut self.subscribers);
        let stopped = futures::future::join_all(subscribers.into_iter().map(|subscriber| {
            let durable = subscriber.health().durable().to_owned();
            async move { (durable, subscriber.shutdown().await) }
        }))
        .await;
        for (durable, stopped) in stopped {
            if let Err(source) = stopped {
                tracing::error!(subscriber = %durable, error = %ErrorChain(&source), "subscriber did not stop cleanly");
                first_error.get_or_insert(RuntimeError::Subscriber { durable, source });
            }
        }
        let mut report = None;
        if let Some(processor) = self.processor.take() {
            match processor.shutdown().await {
                Ok(stopped) => report = Some(stopped), // the processor logs it
                Err(err) => {
                    tracing::error!(error = %ErrorChain(&err), "outbox processor did not stop cleanly");
                    first_error.get_or_insert(err.into());
                }
            }
        }
        for task in self.background.drain(..) {
            task.abort();
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(report),
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        for task in self.background.drain(..) {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// One `GET` on a connection of its own: the response's status line.
    async fn status_of(addr: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        response.lines().next().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn serve_merges_the_routes_and_ends_with_the_shutdown() {
        let runtime = Runtime::builder()
            .handle_signals(false)
            .start()
            .await
            .expect("an empty runtime starts");
        let token = runtime.shutdown_token();
        let health = runtime.health();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let addr = listener.local_addr().expect("its address");
        let app = Router::new().route("/hello", get(|| async { "hello" }));
        let serving = tokio::spawn(runtime.serve(listener, app));

        assert_eq!(status_of(addr, "/hello").await, "HTTP/1.1 200 OK");
        assert_eq!(status_of(addr, "/health/live").await, "HTTP/1.1 200 OK");
        assert_eq!(status_of(addr, "/health/ready").await, "HTTP/1.1 200 OK");
        assert_eq!(status_of(addr, "/health/outbox").await, "HTTP/1.1 200 OK");
        assert_eq!(
            status_of(addr, "/health/outbox?strict=true").await,
            "HTTP/1.1 200 OK",
            "nothing to degrade"
        );

        token.cancel();
        let report = serving
            .await
            .expect("the serving task")
            .expect("served and shut down cleanly");
        assert!(report.is_none(), "no processor, no report");
        assert!(health.liveness().shutting_down, "shut down");
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "the listener is closed"
        );
    }
}
