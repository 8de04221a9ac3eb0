//! The streams a [`Runtime`](crate::Runtime) ensures
//! ([`RuntimeBuilder::stream`](crate::RuntimeBuilder::stream)): at start
//! when the broker answers, otherwise in the background once it does.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use txoutbox_core::ErrorChain;
use txoutbox_core::backoff::Doubling;
use txoutbox_nats::StreamSpec;
use txoutbox_nats::async_nats::connection::State;
use txoutbox_nats::async_nats::jetstream;

use crate::RuntimeError;

/// How often the background task looks whether the client has connected.
const CONNECTION_CHECK: Duration = Duration::from_millis(50);

/// The pauses between two attempts at a stream while the broker does not
/// answer: doubling from the first to the second.
const RETRY_PAUSES: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

/// The streams given to the builder, each with the JetStream context to
/// ensure it on.
#[derive(Debug, Default)]
pub(crate) struct RuntimeStreams {
    specs: Vec<(jetstream::Context, StreamSpec)>,
}

/// What the runtime's streams need: one problem line per stream that is
/// not ensured yet (the broker away) or cannot be used (wrong); cheap to
/// clone, shared with the background task.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamProblems {
    problems: Arc<Mutex<Vec<(String, String)>>>,
}

impl StreamProblems {
    /// One line per stream with a problem.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lock()
            .iter()
            .map(|(_, problem)| problem.clone())
            .collect()
    }

    fn set(&self, stream: &str, problem: Option<String>) {
        let mut problems = self.lock();
        problems.retain(|(name, _)| name != stream);
        if let Some(problem) = problem {
            problems.push((stream.to_owned(), problem));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, String)>> {
        self.problems.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RuntimeStreams {
    pub(crate) fn push(&mut self, jetstream: jetstream::Context, spec: StreamSpec) {
        self.specs.push((jetstream, spec));
    }

    /// Ensures every stream whose client is connected now, and fails on
    /// what is wrong (a spec that cannot work, a stream that does not fit):
    /// the start fails then, as without the runtime. A stream whose broker
    /// is away is ensured in the background, once the client connects,
    /// until `shutdown`; meanwhile, and if it then turns out wrong, the
    /// returned problems say so.
    pub(crate) async fn ensure(
        self,
        shutdown: &CancellationToken,
    ) -> Result<StreamProblems, RuntimeError> {
        for (_, spec) in &self.specs {
            spec.check()?;
        }
        let problems = StreamProblems::default();
        for (context, spec) in self.specs {
            if context.client().connection_state() == State::Connected {
                match spec.ensure(&context).await {
                    Ok(_) => continue,
                    Err(err) if err.is_away() => {}
                    Err(err) => return Err(err.into()),
                }
            }
            problems.set(spec.name(), Some(waiting(&spec)));
            tokio::spawn(ensure_later(
                context,
                spec,
                problems.clone(),
                shutdown.clone(),
            ));
        }
        Ok(problems)
    }
}

fn waiting(spec: &StreamSpec) -> String {
    format!(
        "stream {} not ensured yet: waiting for the NATS server",
        spec.name()
    )
}

/// Ensures `spec` once the client connects, retrying while the server does
/// not answer; a stream that cannot be used stays a problem, logged once.
async fn ensure_later(
    context: jetstream::Context,
    spec: StreamSpec,
    problems: StreamProblems,
    shutdown: CancellationToken,
) {
    let client = context.client();
    let mut pauses = Doubling::new(RETRY_PAUSES.0, RETRY_PAUSES.1);
    tracing::info!(stream = %spec.name(), "NATS not connected: the stream is ensured once it is");
    loop {
        while client.connection_state() != State::Connected {
            tokio::select! {
                () = tokio::time::sleep(CONNECTION_CHECK) => {}
                () = shutdown.cancelled() => return,
            }
        }
        match spec.ensure(&context).await {
            Ok(_) => {
                tracing::info!(stream = %spec.name(), "stream ensured");
                problems.set(spec.name(), None);
                return;
            }
            Err(err) if err.is_away() => {
                tracing::warn!(stream = %spec.name(), error = %ErrorChain(&err), "stream not ensured yet; retrying");
                problems.set(spec.name(), Some(waiting(&spec)));
            }
            Err(err) => {
                tracing::error!(stream = %spec.name(), error = %ErrorChain(&err), "the stream cannot be used; the outbox publishes nothing there until it is fixed and the service restarted");
                problems.set(
                    spec.name(),
                    Some(format!("stream {}: {}", spec.name(), ErrorChain(&err))),
                );
                return;
            }
        }
        tokio::select! {
            () = tokio::time::sleep(pauses.next_pause()) => {}
            () = shutdown.cancelled() => return,
        }
    }
}
