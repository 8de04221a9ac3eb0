//! The processor's and the subscribers' health on the console's health page:
//! [`HealthSource`], given by the service that runs them (the axum
//! runtime's `Runtime::console`), and what it reports, an [`OutboxHealth`]
//! (the same report as the runtime's `/health/outbox`).

use std::future::Future;
use std::pin::Pin;

use txoutbox_nats::OutboxHealth;

/// The health of the parts a service runs, at one moment: now the runtime's
/// own report.
#[deprecated(
    note = "the console shows the runtime's report: use `txoutbox_nats::OutboxHealth` \
            (`ready` is `ok`; `HealthReport::new(p, s, problems)` is \
            `OutboxHealth::judge(None, p, s, Vec::new())`)"
)]
pub type HealthReport = OutboxHealth;

/// A boxed health check, as [`HealthSource::report`] returns it.
pub type HealthFuture = Pin<Box<dyn Future<Output = OutboxHealth> + Send>>;

/// Where the console reads the health of the processor and the subscribers
/// it runs beside: a console served by the `outbox console` command has
/// none, and says so.
pub trait HealthSource: Send + Sync + 'static {
    /// Checks every part (may ask NATS for consumer info).
    fn report(&self) -> HealthFuture;
}
