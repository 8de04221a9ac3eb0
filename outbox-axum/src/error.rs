//! [`RuntimeError`]: what starting or stopping a [`Runtime`](crate::Runtime)
//! can fail with.

use txoutbox_core::processor::{ProcessorBuildError, ProcessorError};
use txoutbox_nats::StreamError;
use txoutbox_nats::subscriber::{SubscriberBuildError, SubscriberError};

/// A [`Runtime`](crate::Runtime) could not start, or a part of it did not
/// stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A subscriber could not be built (its consumer, stream or handlers).
    #[error("building a subscriber")]
    SubscriberBuild(#[from] SubscriberBuildError),
    /// A stream given to
    /// [`RuntimeBuilder::stream`](crate::RuntimeBuilder::stream) cannot
    /// work (a duplicate window shorter than the processor's lease), or
    /// the broker answered at start and the stream does not fit (it does
    /// not capture the subjects, its subjects overlap another stream's, a
    /// permission is denied).
    #[error("ensuring a stream")]
    Stream(#[from] StreamError),
    /// The processor could not be built (a setting that cannot work).
    #[error("building the processor")]
    ProcessorBuild(#[from] ProcessorBuildError),
    /// The Prometheus recorder could not be installed: most often another
    /// recorder is installed already; pass its
    /// [`PrometheusHandle`](metrics_exporter_prometheus::PrometheusHandle)
    /// with [`RuntimeBuilder::metrics`](crate::RuntimeBuilder::metrics)
    /// instead.
    #[error(
        "installing the Prometheus recorder (another metrics recorder is installed? pass its \
         PrometheusHandle with RuntimeBuilder::metrics)"
    )]
    Metrics(#[from] metrics_exporter_prometheus::BuildError),
    /// A subscriber stopped with an error (its consumer was deleted, or its
    /// task failed).
    #[error("subscriber `{durable}` did not stop cleanly")]
    Subscriber {
        /// The subscriber's durable consumer.
        durable: String,
        /// What it stopped with.
        #[source]
        source: SubscriberError,
    },
    /// The processor stopped on its own (e.g. its table is missing:
    /// `ProcessorError::MissingSchema`, naming what to run) or its task
    /// failed (its leased messages become claimable again when their lease
    /// runs out).
    #[error("the processor failed")]
    Processor(#[from] ProcessorError),
    /// The HTTP server of [`Runtime::serve`](crate::Runtime::serve) failed
    /// (the runtime was still shut down in order).
    #[error("serving HTTP")]
    Serve(#[source] std::io::Error),
}
