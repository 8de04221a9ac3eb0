//! Reading under the reader lease (see [`lease`](super::lease)): the fetch
//! loops run in *sessions* while this process holds the lease of every
//! consumer it reads, and it *stands by*, pulling nothing, in between.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use txoutbox_core::ErrorChain;

use super::lease::{Lease, Taken, standby_poll};
use crate::subscriber::config::SubscriberError;
use crate::subscriber::setup::Shared;

/// Runs `read` (the fetch loops of `consumers`) in sessions while this
/// process holds the lease of every one of them, standing by in between,
/// until `stop` is cancelled or `read` fails (see the module docs).
pub(crate) async fn read_under_lease<F, Fut>(
    shared: &Arc<Shared>,
    consumers: &[PullConsumer],
    stop: &CancellationToken,
    read: F,
) -> Result<(), SubscriberError>
where
    F: Fn(CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), SubscriberError>>,
{
    let Some(lease) = &shared.lease else {
        return read(stop.clone()).await;
    };
    let names: Vec<String> = consumers
        .iter()
        .map(|consumer| consumer.cached_info().name.clone())
        .collect();
    loop {
        let Some(tokens) = stand_by(shared, lease, &names, stop).await else {
            return Ok(());
        };
        let session = stop.child_token();
        let reading = async {
            let result = read(session.clone()).await;
            session.cancel();
            result
        };
        let (result, ()) = tokio::join!(reading, renew(shared, lease, &names, tokens, &session));
        shared.gate.set(None);
        if stop.is_cancelled() || result.is_err() {
            lease.end(&shared.consumer, &names).await;
            return result;
        }
        tracing::warn!(consumer = %shared.consumer, "the reader lease was lost: this process handed back what it held and stands by");
    }
}

/// Waits until this process holds every lease of `names` (their tokens);
/// `None` when `stop` is cancelled first.
async fn stand_by(
    shared: &Shared,
    lease: &Lease,
    names: &[String],
    stop: &CancellationToken,
) -> Option<Vec<u64>> {
    let mut told: Option<String> = None;
    let mut failing = false;
    loop {
        let sent = Instant::now();
        let taken = lease.take(names).await;
        if taken.is_ok() {
            failing = false;
        }
        match taken {
            Ok(Taken::Ours(tokens)) => {
                shared.gate.set(Some(lease.until(sent)));
                tracing::info!(consumer = %shared.consumer, holder = %lease.holder, ?tokens, "took the reader lease: this process reads the durable");
                return Some(tokens);
            }
            Ok(Taken::Unsupported) => {
                // Checked at build; an inbox that stops keeping leases
                // reads without one.
                shared.gate.set(Some(far_future()));
                return Some(Vec::new());
            }
            Ok(Taken::Theirs { name, holder, ours }) => {
                // Not half of them: two processes owning the same
                // partitions would each hold some and wait forever.
                lease.end(&shared.consumer, &ours).await;
                if told.as_deref() != Some(holder.as_str()) {
                    tracing::info!(consumer = %shared.consumer, lease = %name, %holder, "standing by: another process holds the reader lease");
                    told = Some(holder);
                }
            }
            // Once per spell of failures (the database away), not every poll.
            Err(err) if failing => {
                tracing::debug!(consumer = %shared.consumer, error = %ErrorChain(&*err), "cannot ask for the reader lease; standing by");
            }
            Err(err) => {
                failing = true;
                tracing::warn!(consumer = %shared.consumer, error = %ErrorChain(&*err), "cannot ask for the reader lease; standing by until the database answers");
            }
        }
        tokio::select! {
            () = stop.cancelled() => return None,
            () = tokio::time::sleep(standby_poll(lease.duration)) => {}
        }
    }
}

/// Renews the leases of `names` every third of their duration while
/// `session` runs; cancels it when one is lost (another holder, or a new
/// token).
async fn renew(
    shared: &Shared,
    lease: &Lease,
    names: &[String],
    tokens: Vec<u64>,
    session: &CancellationToken,
) {
    let every = lease.duration / 3;
    let mut failing = false;
    loop {
        // After a failure, again sooner: the lease's time runs out.
        let pause = if failing { every / 2 } else { every };
        tokio::select! {
            () = session.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
        let sent = Instant::now();
        match lease.take(names).await {
            Ok(Taken::Ours(now)) if now == tokens => {
                shared.gate.set(Some(lease.until(sent)));
                if std::mem::take(&mut failing) {
                    tracing::info!(consumer = %shared.consumer, "renewed the reader lease again");
                }
            }
            Ok(Taken::Ours(_)) | Ok(Taken::Theirs { .. }) => {
                shared.gate.set(None);
                tracing::warn!(consumer = %shared.consumer, "another process took the reader lease: this process stops starting handlers and hands back what it holds");
                session.cancel();
                return;
            }
            Ok(Taken::Unsupported) => return,
            Err(err) => {
                if !failing {
                    tracing::warn!(consumer = %shared.consumer, error = %ErrorChain(&*err), "cannot renew the reader lease; once it runs out, no handler starts until it is renewed");
                }
                failing = true;
            }
        }
    }
}

/// An instant that never comes, for a gate without a lease's end.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}
