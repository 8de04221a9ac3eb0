//! The durable pull consumer: created if absent, verified if present.

use async_nats::jetstream::consumer::{AckPolicy, Config, PullConsumer, pull};
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use async_nats::jetstream::stream::Stream;

use super::error::BuildError;

/// Creates the durable consumer `wanted` describes on `stream`, or checks
/// that the existing one has the same settings.
pub(crate) async fn ensure(
    stream: &Stream,
    wanted: pull::Config,
) -> Result<PullConsumer, BuildError> {
    let durable = wanted.durable_name.clone().unwrap_or_default();
    let failed = |source: Box<dyn std::error::Error + Send + Sync>| BuildError::Consumer {
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

fn verify(durable: &str, existing: &Config, wanted: &pull::Config) -> Result<(), BuildError> {
    let mismatch = |setting: &'static str, existing: String, wanted: String| {
        Err(BuildError::ConsumerMismatch {
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
    if existing.ack_policy != AckPolicy::Explicit {
        return mismatch(
            "ack_policy",
            format!("{:?}", existing.ack_policy),
            format!("{:?}", AckPolicy::Explicit),
        );
    }
    if existing.ack_wait != wanted.ack_wait {
        return mismatch(
            "ack_wait",
            format!("{:?}", existing.ack_wait),
            format!("{:?}", wanted.ack_wait),
        );
    }
    if existing.max_deliver != wanted.max_deliver {
        return mismatch(
            "max_deliver",
            existing.max_deliver.to_string(),
            wanted.max_deliver.to_string(),
        );
    }
    if existing.max_ack_pending != wanted.max_ack_pending {
        return mismatch(
            "max_ack_pending",
            existing.max_ack_pending.to_string(),
            wanted.max_ack_pending.to_string(),
        );
    }
    if existing.filter_subject != wanted.filter_subject {
        return mismatch(
            "filter_subject",
            format!("{:?}", existing.filter_subject),
            format!("{:?}", wanted.filter_subject),
        );
    }
    if existing.deliver_policy != wanted.deliver_policy {
        return mismatch(
            "deliver_policy",
            format!("{:?}", existing.deliver_policy),
            format!("{:?}", wanted.deliver_policy),
        );
    }
    Ok(())
}
