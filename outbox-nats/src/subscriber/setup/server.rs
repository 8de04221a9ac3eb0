//! What a subscriber sets up on the server before it reads: its stream
//! read, its dead-letter stream, its durable consumers created or
//! verified. At build when the client is connected; otherwise when the
//! subscriber runs, once the broker answers.

use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::{
    self,
    consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull},
    context::{
        ConsumerInfoError, ConsumerInfoErrorKind, GetStreamByNameError, GetStreamByNameErrorKind,
        GetStreamErrorKind,
    },
    stream::{ConsumerError, ConsumerErrorKind},
};
use tokio_util::sync::CancellationToken;
use txoutbox_core::ErrorChain;
use txoutbox_core::backoff::Doubling;

use super::consumer;
use super::partitioned::PullSpec;
use super::shared::Shared;
use super::status::SetupState;
use crate::StreamSpec;
use crate::subject::covers;
use crate::subscriber::config::SubscriberBuildError;
use crate::subscriber::takeover::failover;

/// How often a subscriber waiting for its first connection looks again.
const CONNECTION_CHECK: Duration = Duration::from_millis(50);

/// The pauses between two setups the broker did not answer (or whose
/// stream is not there yet): doubling from the first to the second.
const RETRY_PAUSES: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

/// The inputs of the setup on the server, checked already.
#[derive(Debug)]
pub(crate) struct Setup {
    pub(crate) stream_name: String,
    pub(crate) keeps_order: bool,
    pub(crate) pulls: Vec<PullSpec>,
    pub(crate) max_ack_pending: i64,
    pub(crate) filter_subject: String,
    pub(crate) partitioned: bool,
    pub(crate) deliver_policy: DeliverPolicy,
    pub(crate) dead_letter_stream: Option<StreamSpec>,
}

impl Setup {
    /// The JetStream consumers it reads.
    pub(crate) fn names(&self) -> Vec<String> {
        self.pulls.iter().map(|pull| pull.durable.clone()).collect()
    }

    /// Sets up on the server now (see the module docs).
    pub(crate) async fn on_the_server(
        &self,
        shared: &Shared,
    ) -> Result<Vec<PullConsumer>, SubscriberBuildError> {
        self.attempt(shared)
            .await
            .map_err(SubscriberBuildError::or_denied)
    }

    async fn attempt(&self, shared: &Shared) -> Result<Vec<PullConsumer>, SubscriberBuildError> {
        let stream_name = &self.stream_name;
        let stream = shared
            .context
            .get_stream(stream_name)
            .await
            .map_err(|source| SubscriberBuildError::stream(stream_name, source))?;
        if let Some(subject) = shared.dead_letter.subject(&shared.consumer) {
            let captured_here = self.filter_subject.is_empty()
                && !self.partitioned
                && stream
                    .cached_info()
                    .config
                    .subjects
                    .iter()
                    .any(|pattern| covers(pattern, &subject));
            if captured_here {
                return Err(SubscriberBuildError::InvalidConfig(format!(
                    "the dead-letter subject `{subject}` is captured by stream `{stream_name}`, \
                     which this consumer reads unfiltered: dead letters would come back to it"
                )));
            }
            ensure_dead_letters_stored(
                &shared.context,
                &shared.consumer,
                self.dead_letter_stream.as_ref(),
                &subject,
            )
            .await?;
        }
        if shared.failover.is_some() {
            failover::check_server(&shared.context, &shared.consumer)?;
        }
        let max_deliver = i64::try_from(shared.max_deliver).unwrap_or(i64::MAX);
        let mut consumers = Vec::new();
        for pull in &self.pulls {
            let mut config = pull::Config {
                durable_name: Some(pull.durable.clone()),
                ack_policy: AckPolicy::Explicit,
                ack_wait: shared.ack_wait,
                max_deliver,
                max_ack_pending: self.max_ack_pending,
                filter_subject: pull.filter.clone(),
                deliver_policy: self.deliver_policy,
                ..Default::default()
            };
            if let Some(pinned_ttl) = shared.failover {
                failover::configure(&mut config, pinned_ttl);
            }
            let ensured = consumer::ensure(&stream, config).await?;
            // With failover, other processes wait on the durable by design.
            if self.keeps_order && shared.failover.is_none() {
                consumer::check_not_in_use(&ensured)?;
            }
            consumers.push(ensured);
        }
        Ok(consumers)
    }

    /// Waits until the client connects, then sets up on the server,
    /// again while the broker does not answer or the stream is not there
    /// yet; `None` when `stop` is cancelled first. What is wrong (a
    /// consumer with other settings, a permission denied, a dead-letter
    /// subject no stream may capture) is returned, logged and kept in
    /// the subscriber's health.
    pub(crate) async fn when_connected(
        &self,
        shared: &Shared,
        stop: &CancellationToken,
    ) -> Option<Result<Vec<PullConsumer>, SubscriberBuildError>> {
        let mut pauses = Doubling::new(RETRY_PAUSES.0, RETRY_PAUSES.1);
        loop {
            while shared.client.connection_state() != State::Connected {
                tokio::select! {
                    () = tokio::time::sleep(CONNECTION_CHECK) => {}
                    () = stop.cancelled() => return None,
                }
            }
            match self.on_the_server(shared).await {
                Ok(consumers) => {
                    tracing::info!(consumer = %shared.consumer, stream = %self.stream_name, "NATS answered: the subscriber's consumers are set up");
                    shared.setup.set(SetupState::Done);
                    return Some(Ok(consumers));
                }
                Err(err) if is_away(&err) => {
                    tracing::warn!(consumer = %shared.consumer, error = %ErrorChain(&err), "the subscriber's consumers are not set up yet; retrying");
                    shared.setup.set(SetupState::Waiting(format!(
                        "its consumers are not set up yet: {}",
                        ErrorChain(&err)
                    )));
                }
                Err(err) => {
                    tracing::error!(consumer = %shared.consumer, error = %ErrorChain(&err), "the subscriber cannot set up its consumers; it stops");
                    shared
                        .setup
                        .set(SetupState::Failed(ErrorChain(&err).to_string()));
                    return Some(Err(err));
                }
            }
            tokio::select! {
                () = tokio::time::sleep(pauses.next_pause()) => {}
                () = stop.cancelled() => return None,
            }
        }
    }
}

/// Whether a setup failed because the broker did not answer, or because
/// something it needs is not there yet (its stream, the stream of its dead
/// letters: another part of the service may be creating it), rather than
/// because something is wrong.
fn is_away(err: &SubscriberBuildError) -> bool {
    match err {
        SubscriberBuildError::StreamMissing { .. }
        | SubscriberBuildError::DeadLettersUncaptured { .. } => true,
        SubscriberBuildError::Stream { source, .. } => source.kind() == GetStreamErrorKind::Request,
        SubscriberBuildError::DeadLetterStream(err) => err.is_away(),
        SubscriberBuildError::Consumer { source, .. } => unanswered(&**source),
        _ => false,
    }
}

/// Whether a consumer (or stream lookup) request failed for want of an
/// answer.
fn unanswered(err: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(err) = err.downcast_ref::<ConsumerInfoError>() {
        return matches!(
            err.kind(),
            ConsumerInfoErrorKind::TimedOut
                | ConsumerInfoErrorKind::Request
                | ConsumerInfoErrorKind::NoResponders
                | ConsumerInfoErrorKind::Offline
        );
    }
    if let Some(err) = err.downcast_ref::<ConsumerError>() {
        return matches!(
            err.kind(),
            ConsumerErrorKind::TimedOut | ConsumerErrorKind::Request
        );
    }
    if let Some(err) = err.downcast_ref::<GetStreamByNameError>() {
        return err.kind() == GetStreamByNameErrorKind::Request;
    }
    false
}

/// Provisions the dead-letter stream if one was given, else checks that
/// a stream captures `subject`.
async fn ensure_dead_letters_stored(
    context: &jetstream::Context,
    durable: &str,
    dead_letter_stream: Option<&StreamSpec>,
    subject: &str,
) -> Result<(), SubscriberBuildError> {
    if let Some(spec) = dead_letter_stream {
        if !spec
            .subjects()
            .iter()
            .any(|pattern| covers(pattern, subject))
        {
            return Err(SubscriberBuildError::InvalidConfig(format!(
                "the dead-letter stream `{}` captures {:?}, not the dead-letter subject \
                 `{subject}`",
                spec.name(),
                spec.subjects()
            )));
        }
        // Dead letters are published once each: no lease to outlast.
        spec.clone()
            .processor_lease(Duration::ZERO)
            .ensure(context)
            .await?;
        return Ok(());
    }
    match context.stream_by_subject(subject).await {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == GetStreamByNameErrorKind::NotFound => {
            Err(SubscriberBuildError::DeadLettersUncaptured {
                subject: subject.to_owned(),
                consumer: durable.to_owned(),
            })
        }
        Err(err) => Err(SubscriberBuildError::Consumer {
            consumer: durable.to_owned(),
            source: Box::new(err),
        }),
    }
}
