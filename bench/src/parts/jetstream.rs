//! The broker's ceiling, no database involved: 200,000 pipelined JetStream
//! publishes of ~300-byte events with `Nats-Msg-Id`, up to 4,096 acks in
//! flight; then the same through [`JetStreamPublisher`] (CloudEvents
//! headers, one call per message, 2,048 in flight like the processor).

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, message::PublishMessage};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use txoutbox_core::{MessageContext, OutboxMessage, PendingMessage, Publisher};
use txoutbox_nats::{DEFAULT_MAX_ACKS_IN_FLIGHT, JetStreamPublisher};

use crate::harness::error::BoxError;
use crate::harness::fixture::{BenchEvent, BenchStream, config};
use crate::harness::machine::CpuTimes;
use crate::harness::report::thousands;

/// Messages per measurement.
const MESSAGES: usize = 200_000;
/// Messages sent before measuring.
const WARMUP: usize = 10_000;
/// Publishes in flight through the publisher (the processor's default
/// `max_in_flight`).
const PUBLISHER_IN_FLIGHT: usize = 2048;

/// The broker's ceilings, in messages per second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JetStreamCeiling {
    /// Raw pipelined publishes with `Nats-Msg-Id`.
    pub(crate) raw: f64,
    /// Through `JetStreamPublisher::publish`.
    pub(crate) publisher: f64,
}

pub(crate) async fn run() -> Result<JetStreamCeiling, BoxError> {
    println!(
        "== JetStream ceiling: {} pipelined publishes of ~300-byte events, no database ==",
        thousands(MESSAGES as f64)
    );
    let stream = BenchStream::create().await?;
    raw(&stream, WARMUP).await?;
    let cpu = CpuTimes::now();
    let raw_rate = raw(&stream, MESSAGES).await?;
    println!(
        "raw send_publish + Nats-Msg-Id, {DEFAULT_MAX_ACKS_IN_FLIGHT} acks in flight   {:>8} msgs/s   ({})",
        thousands(raw_rate),
        CpuTimes::now().since(&cpu)
    );
    through_publisher(&stream, WARMUP).await?;
    let cpu = CpuTimes::now();
    let publisher_rate = through_publisher(&stream, MESSAGES).await?;
    println!(
        "JetStreamPublisher::publish, {PUBLISHER_IN_FLIGHT} in flight              {:>8} msgs/s   ({})",
        thousands(publisher_rate),
        CpuTimes::now().since(&cpu)
    );
    let stored = stream.messages().await?;
    let expected = 2 * (MESSAGES + WARMUP) as u64;
    if stored != expected {
        return Err(format!("the stream holds {stored} messages, {expected} were sent").into());
    }
    stream.delete().await?;
    Ok(JetStreamCeiling {
        raw: raw_rate,
        publisher: publisher_rate,
    })
}

/// `count` raw publishes; returns messages per second.
pub(crate) async fn raw(stream: &BenchStream, count: usize) -> Result<f64, BoxError> {
    let jetstream = jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(5))
        .max_ack_inflight(DEFAULT_MAX_ACKS_IN_FLIGHT)
        .backpressure_on_inflight(true)
        .build(stream.client.clone());
    let subject = format!("{}.bench.raw", stream.prefix);
    let payload = serde_json_payload();
    let mut acks = FuturesUnordered::new();
    let started = Instant::now();
    for _ in 0..count {
        let message = PublishMessage::build()
            .payload(payload.clone().into())
            .message_id(uuid::Uuid::now_v7().to_string());
        let ack = jetstream.send_publish(subject.clone(), message).await?;
        acks.push(ack.into_future());
        while acks.len() >= DEFAULT_MAX_ACKS_IN_FLIGHT {
            if let Some(ack) = acks.next().await {
                ack?;
            }
        }
    }
    while let Some(ack) = acks.next().await {
        ack?;
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

/// `count` messages through the publisher; returns messages per second.
async fn through_publisher(stream: &BenchStream, count: usize) -> Result<f64, BoxError> {
    let publisher = JetStreamPublisher::new(stream.client.clone(), "/txoutbox-bench");
    let prefix = config(&stream.prefix)?.subject_prefix().clone();
    let context = MessageContext::new();
    let messages = (0..count)
        .map(|n| {
            let pending = PendingMessage::new(&BenchEvent::new(format!("ceiling-{n}")))?;
            Ok(OutboxMessage::standalone(pending, &context, &prefix))
        })
        .collect::<Result<Vec<_>, BoxError>>()?;
    let started = Instant::now();
    let mut results = futures::stream::iter(&messages)
        .map(|message| publisher.publish(message))
        .buffer_unordered(PUBLISHER_IN_FLIGHT);
    while let Some(result) = results.next().await {
        result?;
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

/// The JSON of one ~300-byte event.
fn serde_json_payload() -> String {
    PendingMessage::new(&BenchEvent::new("ceiling".to_owned()))
        .map(|m| m.payload().as_str().to_owned())
        .unwrap_or_default()
}
