//! The shutdown signal: SIGTERM, Ctrl-C (SIGINT), or the runtime's token.

use tokio_util::sync::CancellationToken;

/// Resolves when `token` is cancelled or, with `signals`, when the process
/// receives SIGTERM or Ctrl-C; cancels `token` then, so every other waiter
/// (and the runtime's readiness) sees it.
pub(crate) async fn shutdown_signal(token: CancellationToken, signals: bool) {
    if signals {
        tokio::select! {
            () = token.cancelled() => {}
            () = ctrl_c() => tracing::info!("Ctrl-C: shutting down"),
            () = terminate() => tracing::info!("SIGTERM: shutting down"),
        }
    } else {
        token.cancelled().await;
    }
    token.cancel();
}

async fn ctrl_c() {
    if let Err(err) = tokio::signal::ctrl_c().await {
        tracing::warn!(error = %err, "cannot listen for Ctrl-C; shutdown waits for the token");
        std::future::pending::<()>().await;
    }
}

#[cfg(unix)]
async fn terminate() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            terminate.recv().await;
        }
        Err(err) => {
            tracing::warn!(error = %err, "cannot listen for SIGTERM; shutdown waits for the token");
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(not(unix))]
async fn terminate() {
    std::future::pending::<()>().await;
}
