//! The processor's and the subscribers' health on the console's health page:
//! [`HealthSource`], given by the service that runs them (the axum
//! runtime's `Runtime::console`), and what it reports, [`HealthReport`].

use std::future::Future;
use std::pin::Pin;

use txoutbox_core::processor::Health;
use txoutbox_nats::subscriber::SubscriberHealth;

/// The health of the parts a service runs, at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HealthReport {
    /// Whether every part is ready.
    pub ready: bool,
    /// The processor's health, if the service runs one.
    pub processor: Option<Health>,
    /// Each subscriber's health (lag, held aggregates, connection).
    pub subscribers: Vec<SubscriberHealth>,
    /// Why it is not ready, one line each.
    pub problems: Vec<String>,
}

impl HealthReport {
    /// A report of `processor` and `subscribers`; `ready` when there is no
    /// problem.
    pub fn new(
        processor: Option<Health>,
        subscribers: Vec<SubscriberHealth>,
        problems: Vec<String>,
    ) -> Self {
        Self {
            ready: problems.is_empty(),
            processor,
            subscribers,
            problems,
        }
    }
}

/// A boxed health check, as [`HealthSource::report`] returns it.
pub type HealthFuture = Pin<Box<dyn Future<Output = HealthReport> + Send>>;

/// Where the console reads the health of the processor and the subscribers
/// it runs beside: a console served by the `outbox console` command has
/// none, and says so.
pub trait HealthSource: Send + Sync + 'static {
    /// Checks every part (may ask NATS for consumer info).
    fn report(&self) -> HealthFuture;
}
