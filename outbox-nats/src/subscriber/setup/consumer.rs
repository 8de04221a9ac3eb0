//! The durable pull consumer: created if absent, verified if present.

use async_nats::jetstream::consumer::{AckPolicy, Config, PriorityPolicy, PullConsumer, pull};
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use async_nats::jetstream::stream::Stream;

use crate::subscriber::config::SubscriberBuildError;

/// Creates the durable consumer `wanted` describes on `stream`, or checks
/// that the existing one has the same settings.
pub(crate) async fn ensure(
    stream: &Stream,
    wanted: pull::Config,
) -> Result<PullConsumer, SubscriberBuildError> {
    let durable = wanted.durable_name.clone().unwrap_or_default();
    let failed =
        |source: Box<dyn std::error::Error + Send + Sync>| SubscriberBuildError::Consumer {
            consumer: durable.clone(),
            source,
        };
    match stream.consumer_info(&durable).await {
        Ok(info) => {
            verify(&durable, &info.config, &wanted)?;
            stream.get_consumer(&durable).await.map_err(&failed)
        }
        Err(err) if err.kind() == ConsumerInfoErrorKind::NotFound => {
            let consumer = stream
                .create_consumer(wanted.clone())
                .await
                .map_err(|err| failed(err.into()))?;
            // Another process may have created it first, with other settings.
            verify(&durable, &consumer.cached_info().config, &wanted)?;
            tracing::info!(consumer = %durable, "created durable pull consumer");
            Ok(consumer)
        }
        Err(err) => Err(failed(err.into())),
    }
}

/// Fails when another process is reading `consumer` (JetStream holds a
/// pull request of it): a subscriber that keeps order must be the durable's
/// only reader (see `SubscriberBuilder::keep_order`).
///
/// A crashed process's pull requests are dropped by the server when its
/// connection closes, so a restart after a crash is not refused; a process
/// cut off without its connection closing (a network partition) holds its
/// requests until they expire (within 30 s, the fetch loop's request
/// expiry).
pub(crate) fn check_not_in_use(consumer: &PullConsumer) -> Result<(), SubscriberBuildError> {
    // `ensure` has just read the consumer's info from the server.
    let info = consumer.cached_info();
    if info.num_waiting > 0 {
        return Err(SubscriberBuildError::DurableInUse {
            consumer: info.name.clone(),
            waiting: info.num_waiting,
        });
    }
    Ok(())
}

fn verify(
    durable: &str,
    existing: &Config,
    wanted: &pull::Config,
) -> Result<(), SubscriberBuildError> {
    let mismatch = |setting: &'static str, existing: String, wanted: String| {
        Err(SubscriberBuildError::ConsumerMismatch {
            consumer: durable.to_owned(),
            setting,
            existing,
            wanted,
        })
    };
    if let Some(subject) = &existing.deliver_subject {
        return mismatch(
            "deliver_subject",
            format!("{subject:?} (a push consumer)"),
            "none (a pull consumer)".into(),
        );
    }
    // Compared as they print: every setting here prints all of its value.
    let settings = [
        (
            "ack_policy",
            debug(&existing.ack_policy),
            debug(&AckPolicy::Explicit),
        ),
        (
            "ack_wait",
            debug(&existing.ack_wait),
            debug(&wanted.ack_wait),
        ),
        (
            "max_deliver",
            debug(&existing.max_deliver),
            debug(&wanted.max_deliver),
        ),
        (
            "max_ack_pending",
            debug(&existing.max_ack_pending),
            debug(&wanted.max_ack_pending),
        ),
        (
            "filter_subject",
            debug(&existing.filter_subject),
            debug(&wanted.filter_subject),
        ),
        (
            "deliver_policy",
            debug(&existing.deliver_policy),
            debug(&wanted.deliver_policy),
        ),
        // Failover: a durable created without it (or with it, for a
        // subscriber without) is refused, never silently changed.
        (
            "priority_policy",
            priority(&existing.priority_policy),
            priority(&wanted.priority_policy),
        ),
        (
            "priority_groups",
            debug(&existing.priority_groups),
            debug(&wanted.priority_groups),
        ),
        (
            "priority_timeout (the failover pin timeout)",
            debug(&existing.priority_timeout),
            debug(&wanted.priority_timeout),
        ),
    ];
    match settings
        .into_iter()
        .find(|(_, existing, wanted)| existing != wanted)
    {
        Some((setting, existing, wanted)) => mismatch(setting, existing, wanted),
        None => Ok(()),
    }
}

/// A priority policy as the mismatch error names it.
fn priority(policy: &PriorityPolicy) -> String {
    match policy {
        PriorityPolicy::None => "none (no failover: update the consumer's priority settings, \
                                 e.g. with `nats consumer edit`, or delete it)"
            .into(),
        PriorityPolicy::PinnedClient => "pinned_client (failover)".into(),
        other => debug(other),
    }
}

fn debug(value: &impl std::fmt::Debug) -> String {
    format!("{value:?}")
}
