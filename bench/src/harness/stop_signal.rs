//! SIGTERM or Ctrl-C for a run: the bench drops the parts' work when one
//! comes, so what the work holds (private PostgreSQL and nats-server
//! servers, child processes, temporary directories) is stopped and removed
//! by its `Drop`, as at a normal end. Without it a run stopped with `kill`
//! left its private servers running.

use tokio::signal::unix::{SignalKind, signal};

/// Resolves with the signal's name once SIGTERM or SIGINT arrives; never,
/// if neither can be listened for (the run then ends only by itself).
pub(crate) async fn received() -> &'static str {
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("cannot listen for SIGTERM and SIGINT: a signal will not stop the run cleanly");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}
