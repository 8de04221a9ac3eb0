//! The bench's streams: publishing envelopes as the outbox publisher
//! would, waiting until a consumer has acked them all, or until a stream
//! holds what a processor published.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::Context;
use async_nats::jetstream::stream::{Config, StorageType};
use txoutbox_core::{
    AggregateRef, MessageContext, OutboxMessage, PendingMessage, SubjectPrefix, wire,
};

use crate::{Result, Step};

/// A fresh memory stream `name` capturing `<prefix>.>`.
pub(crate) async fn create(js: &Context, name: &str, prefix: &str) -> Result {
    js.create_stream(Config {
        name: name.to_owned(),
        subjects: vec![format!("{prefix}.>")],
        storage: StorageType::Memory,
        max_age: Duration::from_secs(900),
        ..Default::default()
    })
    .await?;
    Ok(())
}

/// Envelope `n` of `aggregates` (`bench/a<n % aggregates>`), with its
/// headers and payload.
pub(crate) fn envelope(
    prefix: &SubjectPrefix,
    n: u64,
    aggregates: u64,
) -> Result<(String, HeaderMap, Vec<u8>)> {
    let message = OutboxMessage::seal(
        PendingMessage::new(&Step { n })?,
        AggregateRef {
            aggregate_type: "bench".into(),
            aggregate_id: format!("a{}", n % aggregates),
            sequence: n / aggregates + 1,
        },
        &MessageContext::new(),
        prefix,
    );
    let mut headers = HeaderMap::new();
    for (name, value) in wire::encode(&message, "/bench")? {
        headers.insert(name.as_ref(), value.as_str());
    }
    Ok((
        message.subject,
        headers,
        message.payload.as_bytes().to_vec(),
    ))
}

/// Publishes `count` envelopes over `aggregates`, pipelined.
pub(crate) async fn publish(js: &Context, prefix: &str, count: u64, aggregates: u64) -> Result {
    let prefix = SubjectPrefix::new(prefix)?;
    let mut acks = Vec::with_capacity(1000);
    for n in 0..count {
        let (subject, headers, payload) = envelope(&prefix, n, aggregates)?;
        acks.push(
            js.publish_with_headers(subject, headers, payload.into())
                .await?,
        );
        if acks.len() == 1000 {
            for ack in acks.drain(..) {
                ack.await?;
            }
        }
    }
    for ack in acks {
        ack.await?;
    }
    Ok(())
}

/// Waits until `consumer` has had every message delivered and acked.
pub(crate) async fn settled(js: &Context, stream: &str, consumer: &str) -> Result {
    let stream = js.get_stream(stream).await?;
    loop {
        let info = stream.consumer_info(consumer).await?;
        if info.num_pending == 0 && info.num_ack_pending == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until `stream` holds `count` messages.
pub(crate) async fn holding(js: &Context, stream: &str, count: u64) -> Result {
    let mut stream = js.get_stream(stream).await?;
    while stream.info().await?.state.messages < count {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}
