//! Asking the server about messages away past their grace, for a
//! subscriber that is its durable's one reader (failover or the reader
//! lease; see [`Overdue::Ask`](super::ordering::Overdue::Ask)).
//!
//! Such a message cannot have gone to another process, so its lane keeps
//! waiting for it: the server redelivers it late when its consumer's leader
//! changed (a new leader counts the redelivery from the ack wait, not the
//! nak's delay), and after its ack wait when the nak was lost. The lane goes
//! on without it only once the server says it will not come back: the
//! consumer's ack floor passed it (settled), or the stream no longer holds
//! it (removed by its limits, purged, deleted).
//!
//! A message settled above the ack floor (acknowledged by a process that
//! read before this one, while an earlier one is still outstanding) is
//! waited for until the floor passes it.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::stream::RawMessageErrorKind;
use tokio::task::JoinHandle;

use super::dispatch::Incoming;
use super::ordering::Lanes;
use crate::subscriber::setup::Shared;

/// How often the server is asked about the messages still overdue.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// Messages asked about at most in one round (the earliest first).
const ROUND: usize = 64;

/// How long one round may take: a server that does not answer (frozen, or
/// away) is asked again at a later round.
const ROUND_TIMEOUT: Duration = Duration::from_secs(5);

/// Rounds of asking, one at a time, off the fetch loop (which must go on
/// sending progress acks while the server is slow to answer).
#[derive(Default)]
pub(crate) struct Asking {
    round: Option<JoinHandle<()>>,
}

impl Asking {
    /// Starts a round unless one is still running.
    pub(crate) fn start(
        &mut self,
        shared: &Arc<Shared>,
        consumer: &PullConsumer,
        lanes: &Lanes<Incoming>,
    ) {
        if self
            .round
            .as_ref()
            .is_some_and(|round| !round.is_finished())
        {
            return;
        }
        let (shared, consumer, lanes) = (Arc::clone(shared), consumer.clone(), lanes.clone());
        self.round = Some(tokio::spawn(async move {
            if tokio::time::timeout(ROUND_TIMEOUT, ask(&shared, &consumer, &lanes))
                .await
                .is_err()
            {
                tracing::debug!(consumer = %shared.consumer, "the server did not answer about overdue messages in time; asking again");
            }
        }));
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        if let Some(round) = self.round.take() {
            round.abort();
        }
    }
}

/// Asks the server about the messages overdue in `lanes`, and makes their
/// lanes go on without those it settled or no longer holds. A server that
/// does not answer is asked again at the next round.
async fn ask(shared: &Shared, consumer: &PullConsumer, lanes: &Lanes<Incoming>) {
    let overdue = lanes.overdue(ROUND);
    if overdue.is_empty() {
        return;
    }
    let floor = match consumer.get_info().await {
        Ok(info) => info.ack_floor.stream_sequence,
        Err(err) => {
            tracing::debug!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&err), "cannot ask about overdue messages yet");
            return;
        }
    };
    let mut stream = None;
    for (key, sequence) in overdue {
        if sequence <= floor {
            tracing::info!(consumer = %shared.consumer, stream_sequence = sequence, "an overdue message is settled: later messages of its aggregate go on");
            lanes.forget(&key, sequence);
            continue;
        }
        if stream.is_none() {
            match shared.context.get_stream(shared.stream.as_ref()).await {
                Ok(found) => stream = Some(found),
                Err(err) => {
                    tracing::debug!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&err), "cannot ask about overdue messages yet");
                    return;
                }
            }
        }
        let Some(stream) = stream.as_ref() else {
            return;
        };
        match stream.get_raw_message(sequence).await {
            Ok(_) => {
                // Still in the stream and not settled: it comes back.
            }
            Err(err) if matches!(err.kind(), RawMessageErrorKind::NoMessageFound) => {
                tracing::warn!(consumer = %shared.consumer, stream_sequence = sequence, "a message nakked for a retry left the stream before it came back: later messages of its aggregate go on without it");
                lanes.forget(&key, sequence);
            }
            Err(err) => {
                tracing::debug!(consumer = %shared.consumer, stream_sequence = sequence, error = %txoutbox_core::ErrorChain(&err), "cannot ask about an overdue message yet");
            }
        }
    }
}
