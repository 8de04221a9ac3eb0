//! The Prometheus recorder: installed once per process, its handle shared
//! by every [`Runtime`](crate::Runtime) that does not bring its own.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::RuntimeError;

/// How often the recorder this crate installed drains its histograms.
pub(crate) const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The recorder this crate installed, if it did.
static INSTALLED: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// The handle of the Prometheus recorder this crate installed, installing
/// it on the first call.
pub(crate) fn installed() -> Result<PrometheusHandle, RuntimeError> {
    let mut installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(handle) = &*installed {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new().install_recorder()?;
    tracing::debug!("installed the Prometheus metrics recorder");
    *installed = Some(handle.clone());
    Ok(handle)
}

/// Drains `handle`'s histograms every [`UPKEEP_INTERVAL`], until aborted.
pub(crate) async fn upkeep(handle: PrometheusHandle) {
    let mut ticks = tokio::time::interval(UPKEEP_INTERVAL);
    loop {
        ticks.tick().await;
        handle.run_upkeep();
    }
}
